package protocol

import (
	"context"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// Signed records (docs/verification.md "Signed records"): a body that
// carries an envelope is accepted only when the envelope is the caller's
// signature of that very body (attest.VerifyRun and its kin), checked
// against the key the caller registered; a body without one is accepted
// unsigned. A v2 statement must name this server's log origin and the
// caller's agent id; a v1 statement names neither and is still accepted
// (what agents signing before v2 send), and `dotlab verify` reports it
// unbound. Every accepted statement is used once (store.SignedStatement).
// The checks come in three stages, cheapest first: refuseReplay before
// role and state, the binding (attest.Precheck) after the screens and
// before the signature, then the signature and the predicate. Errors:
// EINVALID at $.envelope.

// signerKey is the caller's registered key, or the refusal of an envelope
// from an agent that registered none.
func signerKey(a *dotlab.Agent) (*attest.PublicKey, error) {
	if a.PublicKey == "" {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.envelope: agent %s registered no public key, so nothing it signs can be checked: send the body without \"envelope\" (it is recorded unsigned), or register a new agent with \"public_key\" (`dotlab agent register` does)", a.ID)
	}
	return attest.ParsePublicKey(a.PublicKey)
}

// refuseReplay refuses env when its statement (the SHA-256 of its decoded
// payload), signed with the key it names, signs a record already: a
// replayed envelope, refused by one indexed read before anything else of
// the record is looked at. An envelope whose payload is not base64, or
// without exactly one signature, passes here and is refused by its form
// later.
func (s *Service) refuseReplay(ctx context.Context, env *dotlab.Envelope) error {
	if env == nil || len(env.Signatures) != 1 {
		return nil
	}
	sum, ok := attest.StatementSHA256(env)
	if !ok {
		return nil
	}
	subject, found, err := s.Store.StatementUse(ctx, sum, env.Signatures[0].KeyID)
	if err != nil {
		return err
	}
	if found {
		return dotlab.Errorf(dotlab.EINVALID, "$.envelope: already posted: this signed statement (sha256 %s) is the envelope of %s, and a signed statement is used once: sign the record you are posting now", sum, subject)
	}
	return nil
}

// checkSigned checks env, the envelope of a record of kind r by a, and
// returns the statement the write records (SubjectID left for the caller;
// the zero SignedStatement for an unsigned body): the caller's key, the
// cheap Precheck (form, predicate type, a v2 statement's log origin and
// agent id), then verify, the signature and the predicate.
func (s *Service) checkSigned(a *dotlab.Agent, env *dotlab.Envelope, r attest.Record, typ tlogfmt.EntryType,
	verify func(*attest.PublicKey, attest.Binding) error) (store.SignedStatement, error) {
	if env == nil {
		return store.SignedStatement{}, nil
	}
	pub, err := signerKey(a)
	if err != nil {
		return store.SignedStatement{}, err
	}
	want := attest.Binding{LogOrigin: s.origin, AgentID: a.ID}
	p, err := attest.Precheck(env, r, want)
	if err != nil {
		return store.SignedStatement{}, err
	}
	if err := verify(pub, want); err != nil {
		return store.SignedStatement{}, err
	}
	return store.SignedStatement{SHA256: p.StatementSHA256, KeyID: pub.ID, SubjectType: typ}, nil
}

func (s *Service) checkSignedRun(ctx context.Context, a *dotlab.Agent, b *dotlab.RunBody) (store.SignedStatement, error) {
	return s.checkSigned(a, b.Envelope, attest.RunRecord, tlogfmt.TypeRun, func(pub *attest.PublicKey, want attest.Binding) error {
		return attest.VerifyRun(ctx, pub, want, b)
	})
}

func (s *Service) checkSignedChallenge(ctx context.Context, a *dotlab.Agent, b *dotlab.ChallengeBody) (store.SignedStatement, error) {
	return s.checkSigned(a, b.Envelope, attest.ChallengeRecord, tlogfmt.TypeChallenge, func(pub *attest.PublicKey, want attest.Binding) error {
		return attest.VerifyChallenge(ctx, pub, want, b)
	})
}

func (s *Service) checkSignedVote(ctx context.Context, a *dotlab.Agent, disputeID string, b *dotlab.VoteBody) (store.SignedStatement, error) {
	return s.checkSigned(a, b.Envelope, attest.VoteRecord, tlogfmt.TypeVote, func(pub *attest.PublicKey, want attest.Binding) error {
		return attest.VerifyVote(ctx, pub, want, disputeID, b)
	})
}
