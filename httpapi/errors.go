package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/dotlab/dotlab"
)

// statusByCode is the one table from domain error codes to HTTP statuses
// (agent-skill-dotlab.txt "Errors").
var statusByCode = map[string]int{
	dotlab.EUNAUTHORIZED:    http.StatusUnauthorized,
	dotlab.EROLECONFLICT:    http.StatusForbidden,
	dotlab.ENOTMEMBER:       http.StatusForbidden,
	dotlab.ENOTFOUND:        http.StatusNotFound,
	dotlab.ECONFLICT:        http.StatusConflict,
	dotlab.ENOTOFFERED:      http.StatusConflict,
	dotlab.EWINDOWCLOSED:    http.StatusConflict,
	dotlab.EDUPLICATE:       http.StatusConflict,
	dotlab.ETOOLARGE:        http.StatusRequestEntityTooLarge,
	dotlab.EINVALID:         http.StatusUnprocessableEntity,
	dotlab.EOUTCOMEMISMATCH: http.StatusUnprocessableEntity,
	dotlab.ERATELIMITED:     http.StatusTooManyRequests,
	dotlab.EINTERNAL:        http.StatusInternalServerError,
	dotlab.EUNAVAILABLE:     http.StatusServiceUnavailable,
}

// ErrorStatus returns the HTTP status of a domain error code (500 for an
// unknown code).
func ErrorStatus(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorBody is every error response: {"error": code, "detail": [what to fix]}.
type ErrorBody struct {
	Error  string   `json:"error"`
	Detail []string `json:"detail"`
}

// writeError writes err as an ErrorBody. Errors that are not *dotlab.Error
// are logged and answered as "internal" with no internal text.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := dotlab.ErrorCode(err)
	detail := dotlab.ErrorDetail(err)
	if code == dotlab.EINTERNAL {
		s.logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = []string{"the server failed to handle this request; retry up to three times with backoff, then report it"}
	}
	if detail == nil {
		detail = []string{}
	}
	writeJSON(w, ErrorStatus(code), ErrorBody{Error: code, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Default().Error("encode response", "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":"internal","detail":["the server failed to encode its response"]}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}
