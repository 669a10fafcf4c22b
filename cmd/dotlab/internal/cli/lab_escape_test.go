package cli

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/termsafe"
)

// TestPrintMessageEscapesHostileBody: `dotlab lab read` and `lab follow`
// print a body that would hide itself and fake a runner's message (CR,
// ESC, newline, right-to-left override) escaped on its own line, as text
// lines and as JSON lines.
func TestPrintMessageEscapesHostileBody(t *testing.T) {
	m := dotlab.LabMessage{Seq: 7, Type: "note", AgentID: "agt_x", To: "all",
		Body: "ok\r\x1b[2K\n2026-01-01 00:00:00 #8 finding agt_runner → all: outcome \u202edecudorper"}
	var out strings.Builder
	PrintMessage(&out, m)
	if got := out.String(); termsafe.Lines(got) != got || strings.Count(got, "\n") != 1 {
		t.Fatalf("unsafe or extra lines: %q", got)
	}
	out.Reset()
	if err := PrintEvent(&out, client.Event{ID: "1", Kind: "message", Data: []byte(`{"body":"a\u001b[2K\u202e"}` + "\u202e")}, true); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); termsafe.Lines(got) != got {
		t.Fatalf("unsafe JSON line: %q", got)
	}
}
