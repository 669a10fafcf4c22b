package protocol

import (
	"context"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
)

// Signed records (docs/verification.md "Signed records"): a body that
// carries an envelope is accepted only when the envelope is the caller's
// signature of that very body (attest.VerifyRun and its kin), checked
// against the key the caller registered; a body without one is accepted
// unsigned. Errors: EINVALID at $.envelope.

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

func checkSignedVote(ctx context.Context, a *dotlab.Agent, disputeID string, b *dotlab.VoteBody) error {
	if b.Envelope == nil {
		return nil
	}
	pub, err := signerKey(a)
	if err != nil {
		return err
	}
	return attest.VerifyVote(ctx, pub, disputeID, b)
}
