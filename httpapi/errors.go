package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// handlerFunc is an API handler in the shape of golang/pkgsite's: it writes
// its answer, or returns an error that the adapter (Server.handle) writes.
// A handler returns an error only before it has written anything.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h to http.HandlerFunc: the one place an API error is
// written.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// internalDetail is the detail of every 500: internal text is never sent
// (docs/protocol.md §5).
const internalDetail = "the server failed to handle this request; retry up to three times with backoff, then report it"

// writeError writes err as an apiv1.ErrorBody with the status of its code
// (apiv1.ErrorStatus), the steps its detail points to given as routes
// (routeHints). Errors that are not a *dotlab.Error are logged and
// answered as "internal" with no internal text.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := dotlab.ErrorCode(err)
	detail := routeHints(dotlab.ErrorLines(err))
	if code == dotlab.EINTERNAL {
		s.logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = []string{internalDetail}
	}
	if detail == nil {
		detail = []string{}
	}
	s.writeJSON(w, apiv1.ErrorStatus(code), apiv1.ErrorBody{Error: code, Detail: detail})
}

// writeJSON writes v as the JSON answer with status.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.logger.Error("encode response", "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(apiv1.ErrorStatus(dotlab.EINTERNAL))
		w.Write([]byte(`{"error":"internal","detail":["the server failed to encode its response"]}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}
