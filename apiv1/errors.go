package apiv1

import (
	"net/http"

	"github.com/dotlab/dotlab"
)

// EMETHODNOTALLOWED is the one code that belongs to HTTP rather than to the
// domain: the path exists, but not for this method (405, with an Allow
// header; docs/protocol.md §5).
const EMETHODNOTALLOWED = "method_not_allowed"

// codeStatus is one row of the code → HTTP status table.
type codeStatus struct {
	code   string
	status int
}

// statusTable is the one table from error codes to HTTP statuses
// (docs/protocol.md §5, spec/openapi.yaml components.schemas.Error). The
// server writes every error through it, and the web pages use it for the
// status of an error page.
func statusTable() []codeStatus {
	return []codeStatus{
		{dotlab.EUNAUTHORIZED, http.StatusUnauthorized},
		{dotlab.EROLECONFLICT, http.StatusForbidden},
		{dotlab.ENOTMEMBER, http.StatusForbidden},
		{dotlab.ENOTFOUND, http.StatusNotFound},
		{dotlab.ENOSUCHROUTE, http.StatusNotFound},
		{EMETHODNOTALLOWED, http.StatusMethodNotAllowed},
		{dotlab.ECONFLICT, http.StatusConflict},
		{dotlab.ENOTOFFERED, http.StatusConflict},
		{dotlab.EWINDOWCLOSED, http.StatusConflict},
		{dotlab.EDUPLICATE, http.StatusConflict},
		{dotlab.ETOOLARGE, http.StatusRequestEntityTooLarge},
		{dotlab.EINVALID, http.StatusUnprocessableEntity},
		{dotlab.EOUTCOMEMISMATCH, http.StatusUnprocessableEntity},
		{dotlab.ERATELIMITED, http.StatusTooManyRequests},
		{dotlab.EINTERNAL, http.StatusInternalServerError},
		{dotlab.EUNAVAILABLE, http.StatusServiceUnavailable},
	}
}

// Codes returns every error code of the table, in its order.
func Codes() []string {
	t := statusTable()
	out := make([]string, len(t))
	for i, row := range t {
		out[i] = row.code
	}
	return out
}

// LookupStatus returns the HTTP status of an error code and whether the
// table has the code.
func LookupStatus(code string) (int, bool) {
	for _, row := range statusTable() {
		if row.code == code {
			return row.status, true
		}
	}
	return 0, false
}

// ErrorStatus returns the HTTP status of an error code: 500 for a code the
// table does not have.
func ErrorStatus(code string) int {
	if s, ok := LookupStatus(code); ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorBody is every error response: {"error": code, "detail": [what to
// fix]}; detail is always an array (docs/protocol.md §5).
type ErrorBody struct {
	Error  string   `json:"error"`
	Detail []string `json:"detail"`
}

// Err returns the error the body describes, as a *dotlab.Error with the
// server's code and detail.
func (b ErrorBody) Err() *dotlab.Error {
	return &dotlab.Error{Code: b.Error, Detail: b.Detail}
}
