package httpapi

import (
	"context"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
)

// Signed records (docs/verification.md "Signed records"): a body that
// carries an envelope is accepted only when the envelope is the caller's
// signature of that very body (attest.VerifyRun and its kin), checked
// against the key the caller registered; a body without one is accepted
// unsigned. Errors: 422 invalid at $.envelope.

// signerKey is the caller's registered key, or the refusal of an envelope
// from an agent that registered none.
func signerKey(a *dotlab.Agent) (*attest.PublicKey, error) {
	if a.PublicKey == "" {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.envelope: agent %s registered no public key, so nothing it signs can be checked: send the body without \"envelope\" (it is recorded unsigned), or register a new agent with \"public_key\" (`dotlab agent register` does)", a.ID)
	}
	return attest.ParsePublicKey(a.PublicKey)
}

func checkSignedRun(ctx context.Context, a *dotlab.Agent, b *dotlab.RunBody) error {
	if b.Envelope == nil {
		return nil
	}
	pub, err := signerKey(a)
	if err != nil {
		return err
	}
	return attest.VerifyRun(ctx, pub, b)
}

func checkSignedChallenge(ctx context.Context, a *dotlab.Agent, b *dotlab.ChallengeBody) error {
	if b.Envelope == nil {
		return nil
	}
	pub, err := signerKey(a)
	if err != nil {
		return err
	}
	return attest.VerifyChallenge(ctx, pub, b)
}

// checkVoteBody holds dispute_id, when given, to the path, and a signed
// vote to its signature; a signed rationale must be stored as signed, so it
// may not start or end with white space (the store trims rationales).
func checkVoteBody(ctx context.Context, a *dotlab.Agent, disputeID string, b *dotlab.VoteBody) error {
	if b.DisputeID != "" && b.DisputeID != disputeID {
		return dotlab.Errorf(dotlab.EINVALID, "$.dispute_id: is %q but you are voting on %s (the path): send the dispute's own id, or leave it out", b.DisputeID, disputeID)
	}
	if b.Envelope == nil {
		return nil
	}
	if strings.TrimSpace(b.Rationale) != b.Rationale {
		return dotlab.Errorf(dotlab.EINVALID, "$.rationale: a signed rationale must not start or end with white space (it is stored trimmed, and would then differ from what you signed): trim it, then sign")
	}
	pub, err := signerKey(a)
	if err != nil {
		return err
	}
	return attest.VerifyVote(ctx, pub, disputeID, b)
}
