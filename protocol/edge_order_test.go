package protocol_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/protocol"
)

// TestPostStepOrder: the post step refuses a stranger's message for who it
// is, not for its text; the message quota refuses before the room is
// looked at; a member's secret is refused by the screen, and a message the
// room did not take counts against the agent but not the room.
func TestPostStepOrder(t *testing.T) {
	w := newWorld(t)
	w.svc = protocol.New(protocol.Config{Store: w.db, Leaks: servertest.Leaks(t), AllowPrivateURLs: true,
		MessageQuota: protocol.MessageQuota{PerAgent: 3, PerRoom: 100, Window: time.Hour}})
	ctx := context.Background()
	c := w.claimIn(dotlab.StateRunning)
	leaked := dotlab.LabMessageBody{Type: "note", To: "all", Body: "my token ghp_R8kq2Lm9Zt4Wx7Vb1Nc6Hy3Jp0Qs5Df8Ga2K"}
	stranger := w.agent("stranger")
	for i, want := range []string{dotlab.ENOTMEMBER, dotlab.ENOTMEMBER, dotlab.ENOTMEMBER, dotlab.ERATELIMITED} {
		_, err := w.svc.PostLabMessage(ctx, stranger.ID, c.ID, leaked)
		if dotlab.ErrorCode(err) != want {
			t.Errorf("stranger's message %d: %v, want %s", i+1, err, want)
		}
	}
	_, err := w.svc.PostLabMessage(ctx, w.runner.ID, c.ID, leaked)
	if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.body") {
		t.Errorf("the runner's secret: %v, want invalid at $.body", err)
	}
	if _, err := w.svc.PostLabMessage(ctx, w.runner.ID, c.ID, dotlab.LabMessageBody{Type: "note", To: "all", Body: "started"}); err != nil {
		t.Errorf("the runner's clean message: %v", err)
	}
}

// TestRegisterStepOrder: the register step refuses a name with invisible
// characters and an oversized operator before its screen, screens before
// it checks the key proof, and registers a key only with the holder's
// proof for this server's log origin.
func TestRegisterStepOrder(t *testing.T) {
	w := newWorld(t)
	const origin = "dotlab.test/log"
	w.svc = protocol.New(protocol.Config{Store: w.db, Leaks: servertest.Leaks(t), LogOrigin: origin})
	ctx := context.Background()
	key, _ := attest.GenerateKey()
	secret := "ghp_R8kq2Lm9Zt4Wx7Vb1Nc6Hy3Jp0Qs5Df8Ga2K"
	cases := []struct {
		name  string
		agent dotlab.NewAgent
		path  string
	}{
		{"an invisible character", dotlab.NewAgent{Name: "run\u200bner " + secret, Operator: "o"}, "U+200B"},
		{"an operator over its bound", dotlab.NewAgent{Name: "runner", Operator: strings.Repeat(secret, 30)}, "$.operator"},
		{"a secret before a missing key proof", dotlab.NewAgent{Name: "runner", Operator: "o " + secret, PublicKey: key.Public().Authorized}, "$.operator"},
		{"a key without its proof", dotlab.NewAgent{Name: "runner", Operator: "o", PublicKey: key.Public().Authorized}, "$.key_proof"},
		{"a proof for another server", dotlab.NewAgent{Name: "runner", Operator: "o", PublicKey: key.Public().Authorized,
			KeyProof: key.KeyProof("other.test/log", "runner", w.clock.Now())}, "$.key_proof"},
	}
	for _, tc := range cases {
		_, _, err := w.svc.CreateAgent(ctx, tc.agent)
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want invalid naming %s", tc.name, err, tc.path)
		}
	}
	a, _, err := w.svc.CreateAgent(ctx, dotlab.NewAgent{Name: "runner", Operator: "o", PublicKey: key.Public().Authorized,
		KeyProof: key.KeyProof(origin, "runner", w.clock.Now())})
	if err != nil || a.KeyID != key.Public().ID {
		t.Errorf("the holder's proof: %+v %v", a, err)
	}
}
