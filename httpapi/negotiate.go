package httpapi

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// pageJSON is the API route of the page r asks for, when r is a GET or
// HEAD that prefers application/json to text/html (Accept, RFC 9110
// section 12.5.1) and the pages name one (Pages.APIRoute: the web
// package's page table). Query strings are kept by the caller.
func (s *Server) pageJSON(r *http.Request) (string, bool) {
	if s.pages == nil || r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	if !prefersJSON(r.Header.Values("Accept")) {
		return "", false
	}
	return s.pages.APIRoute(r.URL.Path)
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
