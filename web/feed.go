package web

import (
	"encoding/xml"
	"net/http"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// feedEntries bounds the Atom feed: the latest settled claims only (older
// ones are in GET /api/v1/claims?state=settled).
const feedEntries = 50

// atomFeed and its parts are the Atom 1.0 document of /feed.atom (RFC 4287;
// the required elements: id, title, updated, an author, and per entry id,
// title, updated, a link rel=alternate).
type atomFeed struct {
	XMLName   xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID        string      `xml:"id"`
	Title     string      `xml:"title"`
	Subtitle  string      `xml:"subtitle"`
	Updated   string      `xml:"updated"` // RFC 3339
	Author    atomPerson  `xml:"author"`
	Links     []atomLink  `xml:"link"`
	Generator string      `xml:"generator"`
	Entries   []atomEntry `xml:"entry"`
}

type atomPerson struct {
	Name string `xml:"name"`
	URI  string `xml:"uri,omitempty"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr"`
	Type string `xml:"type,attr,omitempty"`
	Href string `xml:"href,attr"`
}

type atomCategory struct {
	Term  string `xml:"term,attr"`
	Label string `xml:"label,attr"`
}

type atomEntry struct {
	ID        string       `xml:"id"`
	Title     string       `xml:"title"`
	Updated   string       `xml:"updated"`
	Published string       `xml:"published"`
	Links     []atomLink   `xml:"link"`
	Category  atomCategory `xml:"category"`
	Summary   string       `xml:"summary"`
}

// feed serves GET /feed.atom: the latest settled claims, newest settled
// first, each with its outcome in the protocol's words and its source.
func (h *Handler) feed(w http.ResponseWriter, r *http.Request) error {
	cs, err := h.store.LatestSettled(r.Context(), feedEntries)
	if err != nil {
		return err
	}
	f := atomFeed{
		ID: h.tagID(feedEpoch, "feed"), Title: h.instanceName() + ": settled claims",
		Subtitle: "Published results rerun under their published spec: each claim's outcome once settled.",
		Updated:  feedEpoch.Format(time.RFC3339),
		Author:   atomPerson{Name: h.instanceName(), URI: h.publicURL},
		Links: []atomLink{{Rel: "self", Type: "application/atom+xml", Href: h.abs("/feed.atom")},
			{Rel: "alternate", Type: "text/html", Href: h.abs("/claims?state=settled")}},
		Generator: "DotLab",
	}
	for i, c := range cs {
		at := c.SettledAt.UTC()
		if i == 0 {
			f.Updated = at.Format(time.RFC3339)
		}
		f.Entries = append(f.Entries, atomEntry{
			ID: h.tagID(c.CreatedAt, "claims/"+c.ID), Title: c.ID + " " + c.Title + " (" + label(c.Outcome) + ")",
			Updated: at.Format(time.RFC3339), Published: at.Format(time.RFC3339),
			Links:    []atomLink{{Rel: "alternate", Type: "text/html", Href: h.abs("/claims/" + c.ID)}},
			Category: atomCategory{Term: string(c.Outcome), Label: label(c.Outcome)},
			Summary:  entrySummary(c),
		})
	}
	b, err := xml.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	serveBytes(w, r, "application/atom+xml; charset=utf-8", 5*time.Minute, append([]byte(xml.Header), b...))
	return nil
}

// entrySummary is a feed entry's text: the outcome in the protocol's words
// and the paper.
func entrySummary(c *dotlab.Claim) string {
	var b strings.Builder
	b.WriteString("Settled " + c.SettledAt.UTC().Format(time.DateOnly) + ": " + outcomeWords(c.Outcome) + ".")
	if c.Manifest != nil {
		b.WriteString(" Source: " + strings.TrimRight(c.Manifest.Source.Citation, ". "))
		if doi := c.Manifest.Source.DOI; doi != "" {
			b.WriteString(" (doi:" + doi + ")")
		}
		b.WriteString(".")
	}
	return b.String()
}
