package protocol_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
)

// TestCheapChecksComeFirst: a step refuses on who, role and state before
// it screens the text or checks a signature (docs/protocol.md §11: the
// server is public), and the screen before the signature.
func TestCheapChecksComeFirst(t *testing.T) {
	w := newWorld(t)
	w.svc = protocol.New(protocol.Config{Store: w.db, Leaks: servertest.Leaks(t), AllowPrivateURLs: true})
	ctx := context.Background()
	c := w.claimIn(dotlab.StateAssigned)
	leaked := func() *dotlab.RunBody {
		b := sqlstoretest.RunBody(c.ID, "1.58", "1.17", dotlab.OutcomeReproduced)
		b.Notes = "rerun with ghp_R8kq2Lm9Zt4Wx7Vb1Nc6Hy3Jp0Qs5Df8Ga2K"
		b.Envelope = &dotlab.Envelope{PayloadType: "application/vnd.in-toto+json", Payload: "e30="}
		return b
	}
	cases := []struct {
		name   string
		agent  *dotlab.Agent
		code   string
		saying string
	}{
		{"a stranger is refused for who it is, not for its text", w.agent("stranger"), dotlab.ENOTOFFERED, "not assigned to you"},
		{"the runner's secret is refused before its signature is looked at", w.runner, dotlab.EINVALID, "$.notes"},
	}
	for _, tc := range cases {
		_, err := w.svc.PublishRun(ctx, tc.agent, leaked(), nil)
		if dotlab.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.saying) {
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.code, tc.saying)
		}
	}
	clean := leaked()
	clean.Notes = ""
	_, err := w.svc.PublishRun(ctx, w.runner, clean, nil)
	if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.envelope") {
		t.Errorf("a clean body with a bad envelope: %v, want invalid at $.envelope", err)
	}
	if after, _ := w.db.FindClaim(ctx, c.ID); after.State != dotlab.StateAssigned {
		t.Errorf("refused publications moved the claim to %s", after.State)
	}
}
