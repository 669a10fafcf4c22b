package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
)

// PrintMessage writes one room message as a line: time, type, from → to, body, refs.
func PrintMessage(w io.Writer, m dotlab.LabMessage) {
	refs := ""
	if len(m.Refs) > 0 {
		refs = " [" + strings.Join(m.Refs, ", ") + "]"
	}
	fmt.Fprintf(w, "%s #%d %-8s %s → %s: %s%s\n", m.CreatedAt.Local().Format(time.DateTime), m.Seq, m.Type, m.AgentID, m.To, m.Body, refs)
}

// PrintEvent writes one live event of a lab room (docs/protocol.md §9): a
// message as PrintMessage does, a state change as "time state → STATE
// (detail)"; with asJSON, the event as one JSON line.
func PrintEvent(w io.Writer, e client.Event, asJSON bool) error {
	if asJSON {
		fmt.Fprintf(w, "{\"id\":%q,\"event\":%q,\"data\":%s}\n", e.ID, e.Kind, e.Data)
		return nil
	}
	switch e.Kind {
	case "message":
		var m dotlab.LabMessage
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return err
		}
		PrintMessage(w, m)
	case "state":
		var s dotlab.ClaimEvent
		if err := json.Unmarshal(e.Data, &s); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s state → %s (%s)\n", s.At.Local().Format(time.DateTime), s.State, s.Detail)
	}
	return nil
}
