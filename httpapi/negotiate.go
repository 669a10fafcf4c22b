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
	case "claims", "runs":
		return "/api/v1" + p, true
	case "agents":
		if parts[1] == "me" {
			return "", false // /api/v1/agents/me is the caller's own record, not a profile
		}
		return "/api/v1" + p, true
	case "labs":
		return "/api/v1" + p + "/messages", true
	}
	return "", false
}

// prefersJSON reports whether application/json gets a higher quality than
// text/html from the Accept header values. Each type takes the quality of
// the most specific range that names it (RFC 9110 section 12.5.1:
// application/json over application/* over */*); a type no range names
// gets 0, and a q that is not a number in [0, 1] makes its range count 0.
func prefersJSON(accept []string) bool {
	q := map[string]float64{}
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			qv := 1.0
			if qs, ok := params["q"]; ok {
				f, err := strconv.ParseFloat(qs, 64)
				if err != nil || f < 0 || f > 1 {
					f = 0
				}
				qv = f
			}
			if old, ok := q[mt]; !ok || qv > old {
				q[mt] = qv
			}
		}
	}
	quality := func(typ, sub string) float64 {
		for _, r := range []string{typ + "/" + sub, typ + "/*", "*/*"} {
			if v, ok := q[r]; ok {
				return v
			}
		}
		return 0
	}
	return quality("application", "json") > quality("text", "html")
}
