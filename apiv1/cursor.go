package apiv1

import (
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
)

// Cursor is the id of a live room event and the resume point of
// GET /labs/{id}/events, written "M.E": Msg is the seq of the last message
// and Ev the seq of the last state change delivered (docs/protocol.md §9).
type Cursor struct {
	Msg, Ev int64
}

// String writes the cursor as "M.E", e.g. "12.5".
func (c Cursor) String() string {
	return strconv.FormatInt(c.Msg, 10) + "." + strconv.FormatInt(c.Ev, 10)
}

// ParseCursor reads "M.E" (the Last-Event-ID header or ?cursor=); the empty
// string is the start of the room. Anything else is an EINVALID error.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	a, b, ok := strings.Cut(s, ".")
	msg, err1 := strconv.ParseInt(a, 10, 64)
	ev, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || msg < 0 || ev < 0 {
		return Cursor{}, dotlab.Errorf(dotlab.EINVALID, "Last-Event-ID: %q must be M.E (last message seq, last state-change seq), e.g. 12.5", s)
	}
	return Cursor{Msg: msg, Ev: ev}, nil
}
