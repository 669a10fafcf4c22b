package httpapi

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// pageJSON maps a public page URL to the API route holding the same data,
// when the request prefers application/json to text/html (Accept, RFC 9110
// section 12.5.1): / → /api/v1/summary, /claims → /api/v1/claims,
// /claims/{id}, /runs/{id}, /agents/{id} → the same under /api/v1,
// /labs/{id} → /api/v1/labs/{id}/messages. Query strings are kept.
func pageJSON(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	if !prefersJSON(r.Header.Values("Accept")) {
		return "", false
	}
	p := r.URL.Path
	switch {
	case p == "/":
		return "/api/v1/summary", true
	case p == "/claims":
		return "/api/v1/claims", true
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 2 || parts[1] == "" {
		return "", false
	}
	switch parts[0] {
	case "claims", "runs", "agents":
		return "/api/v1" + p, true
	case "labs":
		return "/api/v1" + p + "/messages", true
	}
	return "", false
}

// prefersJSON reports whether application/json has a higher quality than
// text/html in the Accept header values (absent types count 0; */* counts
// for both, so a browser's "text/html,…,*/*;q=0.8" stays HTML).
func prefersJSON(accept []string) bool {
	var jsonQ, htmlQ float64 = -1, -1
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if qs, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(qs, 64); err == nil {
					q = f
				}
			}
			switch mt {
			case "application/json":
				jsonQ = max(jsonQ, q)
			case "text/html":
				htmlQ = max(htmlQ, q)
			}
		}
	}
	return jsonQ > 0 && jsonQ > htmlQ
}
