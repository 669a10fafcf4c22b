package web

import "strings"

// The page table: every public page and the API resource that holds the
// same data. The pages link it (<link rel="alternate"
// type="application/json">), and the HTTP edge answers a page asked for
// with Accept: application/json from it (APIRoute): / → /api/v1/summary,
// /claims → /api/v1/claims, /claims/{id}, /runs/{id}, /agents/{id} → the
// same under /api/v1, /labs/{id} → /api/v1/labs/{id}/messages. The docs,
// spec and asset pages have no API resource.
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
