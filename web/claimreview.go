package web

import (
	"encoding/json"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// claimReview is the schema.org ClaimReview of a settled claim whose
// outcome was compared (https://schema.org/ClaimReview): the claim reviewed
// (the claim's title), the item reviewed (a Claim whose appearance is the
// paper, by DOI or citation), when it settled, who reviewed (the instance)
// and a rating that is text only, in the protocol's words (reviewWords):
// alternateName, no ratingValue, bestRating or worstRating.
type claimReview struct {
	Context       string   `json:"@context"`
	Type          string   `json:"@type"`
	URL           string   `json:"url"`
	Name          string   `json:"name"`
	ClaimReviewed string   `json:"claimReviewed"`
	ItemReviewed  ldClaim  `json:"itemReviewed"`
	DatePublished string   `json:"datePublished"` // ISO 8601, the claim's settled_at
	Author        ldOrg    `json:"author"`
	ReviewBody    string   `json:"reviewBody"`
	ReviewRating  ldRating `json:"reviewRating"`
}

// ldClaim is a schema.org Claim: the published result, which first
// appeared in the paper.
type ldClaim struct {
	Type            string `json:"@type"` // Claim
	Name            string `json:"name"`
	Appearance      ldWork `json:"appearance"`
	FirstAppearance ldWork `json:"firstAppearance"`
}

// ldWork is the paper as a ScholarlyArticle: its citation as the name, its
// DOI as an identifier and its doi.org URL (else the manifest's source URL).
type ldWork struct {
	Type       string        `json:"@type"` // ScholarlyArticle
	Name       string        `json:"name"`
	URL        string        `json:"url,omitempty"`
	Identifier *ldIdentifier `json:"identifier,omitempty"`
}

type ldIdentifier struct {
	Type       string `json:"@type"` // PropertyValue
	PropertyID string `json:"propertyID"`
	Value      string `json:"value"`
}

type ldOrg struct {
	Type string `json:"@type"` // Organization
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

type ldRating struct {
	Type          string `json:"@type"` // Rating
	AlternateName string `json:"alternateName"`
}

// claimReviewJSON returns the claim's ClaimReview as JSON for a
// <script type="application/ld+json"> element, or "" for a claim that is not
// settled or settled as spec_issue or input_mismatch (they say nothing
// about the paper). The text is json.Marshal's, which writes <, > and & as
// \u003c, \u003e and \u0026 (and U+2028, U+2029 escaped), so no title can
// close the script element or open a comment: it is safe as template.JS.
func (h *Handler) claimReviewJSON(c *dotlab.Claim) (template.JS, error) {
	words, ok := reviewWords(c.Outcome)
	if !ok || c.State != dotlab.StateSettled || c.SettledAt == nil || c.Manifest == nil {
		return "", nil
	}
	src := c.Manifest.Source
	paper := ldWork{Type: "ScholarlyArticle", Name: src.Citation, URL: src.URL}
	if src.DOI != "" {
		paper.URL = doiURL(src.DOI)
		paper.Identifier = &ldIdentifier{Type: "PropertyValue", PropertyID: "doi", Value: src.DOI}
	}
	rv := claimReview{
		Context: "https://schema.org", Type: "ClaimReview", URL: h.abs("/claims/" + c.ID),
		Name:          c.ID + ": " + words,
		ClaimReviewed: c.Title,
		ItemReviewed:  ldClaim{Type: "Claim", Name: c.Title, Appearance: paper, FirstAppearance: paper},
		DatePublished: c.SettledAt.UTC().Format(time.RFC3339),
		Author:        ldOrg{Type: "Organization", Name: h.instanceName(), URL: h.publicURL},
		ReviewBody: "The published code, data and environment pinned by manifest " + c.ManifestHash +
			" were rerun and each target compared with its published value within its tolerance: " + words + ".",
		ReviewRating: ldRating{Type: "Rating", AlternateName: words},
	}
	b, err := json.Marshal(rv)
	return template.JS(b), err
}

// doiURL links a DOI at doi.org, each segment percent-encoded (a DOI may
// hold '#' or '?').
func doiURL(doi string) string {
	if doi == "" {
		return ""
	}
	segs := strings.Split(doi, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return "https://doi.org/" + strings.Join(segs, "/")
}
