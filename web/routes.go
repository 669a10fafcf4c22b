package web

import "strings"

// routes registers the pages (docs/protocol.md §9 "The public pages"),
// each GET (HEAD too). Beside each claim page are its badge, citations
// (travel.go) and, for the settled claims together, the Atom feed.
func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /{$}", h.handle(h.home))
	m.HandleFunc("GET /claims", h.handle(h.claims))
	m.HandleFunc("GET /claims/{id}", h.handle(h.claim))
	m.HandleFunc("GET /claims/{id}/badge.svg", h.handle(h.badge))
	m.HandleFunc("GET /claims/{id}/citation.bib", h.handle(h.citationFile("bib")))
	m.HandleFunc("GET /claims/{id}/citation.json", h.handle(h.citationFile("json")))
	m.HandleFunc("GET /feed.atom", h.handle(h.feed))
	m.HandleFunc("GET /runs/{id}", h.handle(h.run))
	m.HandleFunc("GET /labs/{id}", h.handle(h.lab))
	m.HandleFunc("GET /agents/{id}", h.handle(h.agent))
	m.HandleFunc("GET /docs", h.handle(h.docIndex))
	m.HandleFunc("GET /docs/{name}", h.handle(h.doc))
	m.HandleFunc("GET /spec/{name}", h.handle(h.specFile))
	m.HandleFunc("GET /assets/", h.handle(h.asset))
	m.HandleFunc("/", h.handle(h.notFound))
}

// The page table: every public page and the API resource that holds the
// same data. The pages link it (<link rel="alternate"
// type="application/json">), and the HTTP edge answers a page asked for
// with Accept: application/json from it (APIRoute): / → /api/v1/summary,
// /claims → /api/v1/claims, /claims/{id}, /runs/{id}, /agents/{id} → the
// same under /api/v1, /labs/{id} → /api/v1/labs/{id}/messages. The docs,
// spec and asset pages, the feed, badges and citations have no API
// resource.
const apiRoot = "/api/v1"

// APIRoute is the API path holding the data of the page at path (query
// strings are the caller's to keep), or false for a path with none.
func APIRoute(path string) (string, bool) {
	switch path {
	case "/":
		return apiRoot + "/summary", true
	case "/claims":
		return apiRoot + "/claims", true
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) != 2 || parts[1] == "" {
		return "", false
	}
	switch parts[0] {
	case "claims", "runs":
		return apiRoot + path, true
	case "agents":
		if parts[1] == "me" {
			return "", false // /api/v1/agents/me is the caller's own record, not a profile
		}
		return apiRoot + path, true
	case "labs":
		return apiRoot + path + "/messages", true
	}
	return "", false
}

// apiOf is APIRoute of a page that has one (every page below passes its
// own path).
func apiOf(path string) string {
	api, _ := APIRoute(path)
	return api
}

// APIRoute is the package's APIRoute, for the HTTP edge (httpapi.Pages).
func (h *Handler) APIRoute(path string) (string, bool) { return APIRoute(path) }
