package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/lazyre"
)

// citation is what both citation formats say of a settled claim's record:
// the instance as author and publisher, the claim id as the record's
// number, its title with the outcome in the protocol's words, the day it
// settled, its URL and a note naming the paper that was rerun.
type citation struct {
	Key, Author, Number, Title, URL, Note string
	Issued                                time.Time
}

// settledCitation returns the citation of c, or ENOTFOUND while c is not
// settled (only a settled record is final enough to cite).
func (h *Handler) settledCitation(c *dotlab.Claim) (citation, error) {
	if c.State != dotlab.StateSettled || c.SettledAt == nil {
		return citation{}, dotlab.Errorf(dotlab.ENOTFOUND, "%s is %s: its record can be cited once the claim settles", c.ID, label(c.State))
	}
	src := c.Manifest.Source
	note := "Rerun of " + strings.TrimRight(src.Citation, ". ")
	if src.DOI != "" {
		note += ", doi:" + src.DOI
	}
	note += ". Manifest SHA-256 " + c.ManifestHash + "."
	return citation{Key: "dotlab-" + c.ID, Author: h.instanceName(), Number: c.ID,
		Title:  c.ID + " " + c.Title + " (" + outcomeWords(c.Outcome) + ")",
		URL:    h.abs("/claims/" + c.ID),
		Note:   note,
		Issued: c.SettledAt.UTC()}, nil
}

// citationFile serves GET /claims/{id}/citation.bib and citation.json.
func (h *Handler) citationFile(format string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		c, err := h.store.FindClaim(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		ct, err := h.settledCitation(c)
		if err != nil {
			return err
		}
		if format == "bib" {
			serveBytes(w, r, "application/x-bibtex; charset=utf-8", 24*time.Hour, ct.bibtex())
			return nil
		}
		b, err := ct.cslJSON()
		if err != nil {
			return err
		}
		serveBytes(w, r, "application/vnd.citationstyles.csl+json", 24*time.Hour, b)
		return nil
	}
}

var bibSafeURL = lazyre.New(`^[A-Za-z0-9:/.\-\[\]]+$`)

// bibtex renders the citation as one @misc entry. Every text field is
// escaped for BibTeX and LaTeX (bibEscape); the url field, which styles
// print verbatim, is written only when it holds no character that would
// need escaping (it is the public URL, already checked, and a claim id).
func (ct citation) bibtex() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "@misc{%s,\n", ct.Key)
	field := func(name, value string) { fmt.Fprintf(&b, "  %s = {%s},\n", name, value) }
	field("author", "{"+bibEscape(ct.Author)+"}") // an organization: one name, never split
	field("title", "{"+bibEscape(ct.Title)+"}")   // case kept as written
	field("howpublished", "DotLab replication record "+bibEscape(ct.Number))
	field("number", bibEscape(ct.Number))
	field("year", ct.Issued.Format("2006"))
	fmt.Fprintf(&b, "  month = %s,\n", strings.ToLower(ct.Issued.Format("Jan")))
	if strings.HasPrefix(ct.URL, "http") && bibSafeURL().MatchString(ct.URL) {
		field("url", ct.URL)
	}
	field("note", bibEscape(ct.Note))
	b.WriteString("}\n")
	return []byte(b.String())
}

// bibEscape writes s as BibTeX field text: LaTeX's special characters as
// commands, braces as \textbraceleft{} and \textbraceright{} (BibTeX counts
// braces even after a backslash, so an escaped brace could still unbalance
// the field), control characters and line breaks as spaces.
func bibEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\textbackslash{}`)
		case r == '{':
			b.WriteString(`\textbraceleft{}`)
		case r == '}':
			b.WriteString(`\textbraceright{}`)
		case r == '^':
			b.WriteString(`\textasciicircum{}`)
		case r == '~':
			b.WriteString(`\textasciitilde{}`)
		case strings.ContainsRune("&%$#_", r):
			b.WriteRune('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteRune(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cslItem is one CSL-JSON item (Citation Style Language 1.0.2, the
// csl-data schema: https://citationstyles.org): a report numbered by the
// claim id, published by the instance.
type cslItem struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"` // report
	Genre     string    `json:"genre"`
	Title     string    `json:"title"`
	Author    []cslName `json:"author"`
	Publisher string    `json:"publisher"`
	Number    string    `json:"number"`
	Issued    cslDate   `json:"issued"`
	URL       string    `json:"URL,omitempty"`
	Note      string    `json:"note"`
}

type cslName struct {
	Literal string `json:"literal"`
}

type cslDate struct {
	DateParts [][]int `json:"date-parts"`
}

// cslJSON renders the citation as a CSL-JSON array of one item.
func (ct citation) cslJSON() ([]byte, error) {
	d := ct.Issued
	item := cslItem{ID: ct.Key, Type: "report", Genre: "Replication record", Title: ct.Title,
		Author: []cslName{{Literal: ct.Author}}, Publisher: ct.Author, Number: ct.Number,
		Issued: cslDate{DateParts: [][]int{{d.Year(), int(d.Month()), d.Day()}}}, URL: ct.URL, Note: ct.Note}
	if !strings.HasPrefix(ct.URL, "http") {
		item.URL = ""
	}
	b, err := json.MarshalIndent([]cslItem{item}, "", "  ")
	return append(b, '\n'), err
}
