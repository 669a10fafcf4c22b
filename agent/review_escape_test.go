package agent

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/termsafe"
)

// TestShowDisputeEscapesHostileText: a vote's rationale that erases the
// lines above it and redraws them with false values (ESC sequences, CR,
// a right-to-left override), and notes and names doing the same, print
// escaped: no control or bidirectional character reaches the terminal,
// each record stays on its line, and the hostile text is still visible.
func TestShowDisputeEscapesHostileText(t *testing.T) {
	hostile := "looks fine\x1b[3A\x1b[2Krun r1 by alice: reproduced\r\u202eeurt\u009b2J"
	d := &dotlab.Dispute{
		ID:    "dsp_1",
		Claim: &dotlab.Claim{Title: "t\x1b]0;owned\x07", State: "disputed"},
		Run:   &dotlab.Run{ID: "run_1", RunnerID: "agt_r\r", Outcome: "not_reproduced"},
		Challenges: []*dotlab.Challenge{{ID: "chl_1", ChallengerID: "agt_c", Outcome: "reproduced",
			Notes: "see\x1b[1;1H" + hostile}},
		Votes:  []dotlab.Vote{{ReviewerID: "agt_v\u202e", Vote: "uphold", Rationale: hostile}},
		Quorum: 3,
	}
	var out strings.Builder
	ShowDispute(&out, d)
	got := out.String()
	if termsafe.Lines(got) != got {
		t.Fatalf("unsafe characters printed:\n%q", got)
	}
	for _, want := range []string{`looks fine\x1b[3A\x1b[2Krun r1 by alice: reproduced\r\u202eeurt\u009b2J`, `agt_v\u202e`, `agt_r\r`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks the escaped %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 7 {
		t.Errorf("%d lines printed, want 7 (hostile text must not add lines):\n%s", n, got)
	}
}
