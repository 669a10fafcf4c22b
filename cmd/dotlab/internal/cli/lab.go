package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/termsafe"
)

// PrintMessage writes one room message as one line: time, type, from → to,
// body, refs, each field with controls and bidirectional characters shown
// escaped (termsafe.Text), so a body cannot draw over other lines.
func PrintMessage(w io.Writer, m dotlab.LabMessage) {
	refs := ""
	if len(m.Refs) > 0 {
		refs = " [" + strings.Join(m.Refs, ", ") + "]"
	}
	t := termsafe.Text
	fmt.Fprintf(w, "%s #%d %-8s %s → %s: %s%s\n", m.CreatedAt.Local().Format(time.DateTime), m.Seq, t(string(m.Type)), t(m.AgentID), t(m.To), t(m.Body), t(refs))
}

// PrintEvent writes one live event of a lab room (docs/protocol.md §9): a
// message as PrintMessage does, a state change as "time state → STATE
// (detail)"; with asJSON, the event as one JSON line.
func PrintEvent(w io.Writer, e client.Event, asJSON bool) error {
	if asJSON {
		fmt.Fprintf(w, "{\"id\":%q,\"event\":%q,\"data\":%s}\n", e.ID, e.Kind, termsafe.Lines(string(e.Data)))
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
		fmt.Fprintf(w, "%s state → %s (%s)\n", s.At.Local().Format(time.DateTime), termsafe.Text(string(s.State)), termsafe.Text(s.Detail))
	}
	return nil
}
