package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/docs"
	"github.com/dotlab/dotlab/spec"
)

// doc is one rendered document of docs/*.md.
type doc struct {
	Name  string // file name without .md: manifest-spec
	Title string // its first level-1 heading
	HTML  template.HTML
}

type docSet struct {
	byName map[string]*doc
	list   []*doc
}

// docOrder puts the documents a reader needs first at the top of /docs.
var docOrder = []string{"manifest-spec", "howto-replication-package", "protocol", "mechanism", "threat-model", "verification", "sandbox"}

// loadDocs renders every embedded docs/*.md once, with GitHub-flavoured
// Markdown (tables), heading ids as GitHub makes them, and links between
// documents rewritten to /docs/{name}. Raw HTML in the Markdown is not
// passed through (goldmark's default), so the pages hold only what the
// renderer writes.
func loadDocs() (*docSet, error) {
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(parser.WithAutoHeadingID(),
			parser.WithASTTransformers(util.Prioritized(linkRewriter{}, 100))),
	)
	names, err := fs.Glob(docs.FS, "*.md")
	if err != nil {
		return nil, err
	}
	set := &docSet{byName: map[string]*doc{}}
	for _, n := range names {
		src, err := fs.ReadFile(docs.FS, n)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := md.Convert(src, &buf); err != nil {
			return nil, fmt.Errorf("docs/%s: %w", n, err)
		}
		d := &doc{Name: strings.TrimSuffix(n, ".md"), Title: firstHeading(src, n), HTML: template.HTML(focusableCode(buf.String()))} // #nosec G203 -- our own docs, rendered without raw HTML
		set.byName[d.Name] = d
		set.list = append(set.list, d)
	}
	rank := func(name string) int {
		for i, n := range docOrder {
			if n == name {
				return i
			}
		}
		return len(docOrder)
	}
	sort.SliceStable(set.list, func(i, j int) bool {
		ri, rj := rank(set.list[i].Name), rank(set.list[j].Name)
		if ri != rj {
			return ri < rj
		}
		return set.list[i].Name < set.list[j].Name
	})
	return set, nil
}

// focusableCode makes each code block of a rendered document (every <pre>
// in it is the renderer's: raw HTML is not passed through) reachable by
// keyboard, since a block wider than the page scrolls: tabindex="0", and a
// labelled region so that a screen reader names what has the focus ("Code
// example 3"; WCAG 2.1.1, axe's scrollable-region-focusable). The focus
// ring is style.css's.
func focusableCode(html string) string {
	parts := strings.Split(html, "<pre>")
	var b strings.Builder
	b.WriteString(parts[0])
	for i, p := range parts[1:] {
		fmt.Fprintf(&b, `<pre tabindex="0" role="region" aria-label="Code example %d">`, i+1)
		b.WriteString(p)
	}
	return b.String()
}

func firstHeading(src []byte, name string) string {
	for _, line := range strings.Split(string(src), "\n") {
		if t, ok := strings.CutPrefix(line, "# "); ok {
			return strings.TrimSpace(strings.ReplaceAll(t, "`", "")) // plain text: no Markdown code marks
		}
	}
	return name
}

// linkRewriter points links between documents (protocol.md#2-roles) at
// their pages (/docs/protocol#2-roles) and links to ../spec/ files at
// /spec/{name}.
type linkRewriter struct{}

func (linkRewriter) Transform(node *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(node, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if l, ok := n.(*ast.Link); ok && entering {
			l.Destination = []byte(rewriteDocLink(string(l.Destination)))
		}
		return ast.WalkContinue, nil
	})
}

func rewriteDocLink(dest string) string {
	if strings.Contains(dest, "://") || strings.HasPrefix(dest, "#") {
		return dest
	}
	file, frag, _ := strings.Cut(dest, "#")
	if frag != "" {
		frag = "#" + frag
	}
	switch {
	case strings.HasSuffix(file, ".md") && !strings.Contains(file, "/"):
		return "/docs/" + strings.TrimSuffix(file, ".md") + frag
	case strings.HasPrefix(file, "../spec/"):
		return "/spec/" + path.Base(file) + frag
	}
	return dest
}

func (h *Handler) docIndex(w http.ResponseWriter, r *http.Request) error {
	h.render(w, r, "docs", http.StatusOK, page{Title: "Documentation", Data: h.docs.list})
	return nil
}

func (h *Handler) doc(w http.ResponseWriter, r *http.Request) error {
	d, ok := h.docs.byName[r.PathValue("name")]
	if !ok {
		return dotlab.Errorf(dotlab.ENOTFOUND, "no document %q: see /docs for the list", r.PathValue("name"))
	}
	h.render(w, r, "doc", http.StatusOK, page{Title: d.Title, Data: d})
	return nil
}

// specFile serves the published JSON Schemas and the OpenAPI description.
func (h *Handler) specFile(w http.ResponseWriter, r *http.Request) error {
	b, ok := spec.Files()[r.PathValue("name")]
	if !ok {
		return dotlab.Errorf(dotlab.ENOTFOUND, "no spec file %q: try manifest.schema.json, lab-message.schema.json or openapi.yaml", r.PathValue("name"))
	}
	ct := "application/schema+json"
	if strings.HasSuffix(r.PathValue("name"), ".yaml") {
		ct = "application/yaml"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
	return nil
}
