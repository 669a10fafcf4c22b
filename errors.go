package dotlab

import (
	"errors"
	"fmt"
	"strings"
)

// Error codes shared by the API, the store and the agent side. Each code maps
// to one HTTP status in httpapi's table (docs/protocol.md §5 "Errors"):
//
//	unauthorized 401 · role_conflict, not_member 403 · not_found, no_such_route 404 ·
//	conflict, not_offered, window_closed, duplicate 409 · too_large 413 ·
//	invalid, outcome_mismatch 422 · rate_limited 429 · internal 500 · unavailable 503
const (
	EUNAUTHORIZED    = "unauthorized"
	EROLECONFLICT    = "role_conflict"
	ENOTMEMBER       = "not_member"
	ENOTFOUND        = "not_found"     // a record (claim, agent, run, message, dispute) that does not exist
	ENOSUCHROUTE     = "no_such_route" // a route (a feature) that the API does not have
	ECONFLICT        = "conflict"
	ENOTOFFERED      = "not_offered"
	EWINDOWCLOSED    = "window_closed"
	EDUPLICATE       = "duplicate"
	ETOOLARGE        = "too_large"
	EINVALID         = "invalid"
	EOUTCOMEMISMATCH = "outcome_mismatch"
	ERATELIMITED     = "rate_limited"
	EINTERNAL        = "internal"
	EUNAVAILABLE     = "unavailable"
)

// NoClaim is the ENOTFOUND error of an unknown claim id: it names the id
// kind and where current ids are listed (docs/protocol.md §5).
func NoClaim(id string) *Error {
	return Errorf(ENOTFOUND, "no claim %q: claim ids look like DL-0001; %s lists the current claims", id, Go(StepListClaims, ""))
}

// NoAgent is the ENOTFOUND error of an unknown agent id.
func NoAgent(id string) *Error {
	return Errorf(ENOTFOUND, "no agent %q: agent ids look like ag_ and 20 characters; %s gives yours, and claims, runs, challenges and lab rooms name the others", id, Go(StepMe, ""))
}

// NoRun is the ENOTFOUND error of an unknown run id.
func NoRun(id string) *Error {
	return Errorf(ENOTFOUND, "no run %q: run ids look like run_…; %s lists the runs, and %s gives a claim's run_id", id, Go(StepListRuns, ""), Go(StepClaim, "{id}"))
}

// Error is a domain error: a stable machine-readable Code and a list of
// human-readable Detail lines, each saying what to fix. It is what the API
// returns as {"error": Code, "detail": Detail}.
type Error struct {
	Code   string
	Detail []string
}

// Error implements error: the code and the detail lines, the steps they
// point to in words (Step.Words; the HTTP edge gives routes instead).
func (e *Error) Error() string {
	if len(e.Detail) == 0 {
		return e.Code
	}
	return e.Code + ": " + stepWordsOf(strings.Join(e.Detail, "; "))
}

// Errorf returns an *Error with one detail line.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: []string{fmt.Sprintf(format, args...)}}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, and
// EINTERNAL otherwise, so unexpected errors never leak their text.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return EINTERNAL
}

// ErrorDetail returns the detail lines of err if it is an *Error, the
// steps they point to in words (Step.Words); for any other error it
// returns nil (internal text is never shown to clients).
func ErrorDetail(err error) []string {
	lines := ErrorLines(err)
	for i, l := range lines {
		lines[i] = stepWordsOf(l)
	}
	return lines
}

// ErrorLines returns a copy of the detail lines of err if it is an *Error,
// their steps still marked (Step.String), for an error built from another
// and for a surface that renders steps its own way (the HTTP edge gives
// routes); nil for any other error.
func ErrorLines(err error) []string {
	var e *Error
	if errors.As(err, &e) && e.Detail != nil {
		return append([]string(nil), e.Detail...)
	}
	return nil
}

// Problems collects path-addressed validation problems ("$.targets[0].name:
// must match ^[A-Za-z0-9_.-]{1,64}$") and turns them into one EINVALID error.
type Problems []string

// Add records one problem at a JSON path.
func (p *Problems) Add(path, format string, args ...any) {
	*p = append(*p, path+": "+fmt.Sprintf(format, args...))
}

// Err returns nil when there are no problems, else an EINVALID *Error whose
// Detail lists them all.
func (p Problems) Err() error {
	if len(p) == 0 {
		return nil
	}
	return &Error{Code: EINVALID, Detail: append([]string(nil), p...)}
}
