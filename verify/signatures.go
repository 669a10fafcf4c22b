package verify

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/tlogfmt"
)

// checkSignatures checks each signed record's envelope against its
// agent's registered key (docs/verification.md "Signed records"): the
// signature, the predicate type and subjects, that the predicate is the
// record as served, and that a v2 statement names this log (the
// checkpoint's origin) and the record's agent; a v1 statement names
// neither and is reported unbound (Report.Unbound). The log entry of each
// envelope is matched by matchRecords; the key must hash to the key id the
// agent's profile shows.
func (v Verifier) checkSignatures(ctx context.Context, rep *Report, rs *records, only map[tlogfmt.Key]bool) {
	keys := map[string]*attest.PublicKey{}
	key := func(agentID, label string) *attest.PublicKey {
		if k, ok := keys[agentID]; ok {
			return k
		}
		keys[agentID] = nil
		p, err := v.Client.Agent(ctx, agentID)
		if err != nil {
			rep.fail("%s: the signer %s cannot be read: %v", label, agentID, err)
			return nil
		}
		if p.PublicKey == "" {
			rep.fail("%s is signed, but its agent %s shows no registered key", label, agentID)
			return nil
		}
		k, err := attest.ParsePublicKey(p.PublicKey)
		if err != nil || k.ID != p.KeyID {
			rep.fail("%s: agent %s shows a public key that is not its key id %s", label, agentID, p.KeyID)
			return nil
		}
		keys[agentID] = k
		return k
	}
	wanted := func(t tlogfmt.EntryType, id string) bool {
		return only == nil || only[tlogfmt.Key{Type: tlogfmt.TypeEnvelope, ID: tlogfmt.EnvelopeID(t, id)}]
	}
	if r := rs.run; r != nil && r.Body.Envelope == nil && wanted(tlogfmt.TypeRun, r.ID) {
		rep.Unsigned = append(rep.Unsigned, "run "+r.ID)
	}
	if r := rs.run; r != nil && r.Body.Envelope != nil && wanted(tlogfmt.TypeRun, r.ID) {
		label := "signature of run " + r.ID
		if k := key(r.RunnerID, label); k != nil {
			err := attest.VerifyRun(ctx, k, bindingOf(rep, r.RunnerID), &r.Body)
			if err == nil && (r.Body.JobID != rs.claim.ID || r.ClaimID != rs.claim.ID) {
				err = dotlab.Errorf(dotlab.EINVALID, "its runner signed it as the run of job %q, not of %s: a signed run is filed under another claim", r.Body.JobID, rs.claim.ID)
			}
			report(rep, label, "run "+r.ID, k, r.Body.Envelope, err)
		}
	}
	for _, ch := range rs.challenges {
		if !wanted(tlogfmt.TypeChallenge, ch.ID) {
			continue
		}
		if ch.Envelope == nil {
			rep.Unsigned = append(rep.Unsigned, "challenge "+ch.ID)
			continue
		}
		label := "signature of challenge " + ch.ID
		if k := key(ch.ChallengerID, label); k != nil {
			report(rep, label, "challenge "+ch.ID, k, ch.Envelope, checkChallenge(ctx, k, bindingOf(rep, ch.ChallengerID), ch))
		}
	}
	for i := range rs.votes {
		vt := &rs.votes[i]
		if !wanted(tlogfmt.TypeVote, tlogfmt.VoteID(rs.claim.ID, vt.ReviewerID)) {
			continue
		}
		if vt.Envelope == nil {
			rep.Unsigned = append(rep.Unsigned, "the vote of "+vt.ReviewerID)
			continue
		}
		label := "signature of the vote of " + vt.ReviewerID
		if k := key(vt.ReviewerID, label); k != nil {
			b := dotlab.VoteBody{Vote: vt.Vote, Rationale: vt.Rationale, DisputeID: rs.claim.ID, Envelope: vt.Envelope}
			report(rep, label, "the vote of "+vt.ReviewerID, k, vt.Envelope, attest.VerifyVote(ctx, k, bindingOf(rep, vt.ReviewerID), rs.claim.ID, &b))
		}
	}
}

// bindingOf is what a v2 statement of agentID's record on this log must
// name: the checkpoint's origin and agentID.
func bindingOf(rep *Report, agentID string) attest.Binding {
	return attest.Binding{LogOrigin: rep.Checkpoint.Origin, AgentID: agentID}
}

// report records the check of record's envelope env, signed with k: a
// failure, or a verified signature, bound (v2: it names this log and the
// record's agent) or unbound (v1: it names neither, so nothing shows it
// was made for this log rather than replayed from another server).
func report(rep *Report, label, record string, k *attest.PublicKey, env *dotlab.Envelope, err error) {
	if err != nil {
		rep.fail("%s does not verify: %v", label, err)
		return
	}
	rep.Signed++
	if p, err := attest.Peek(env); err == nil && p.Bound() {
		rep.ok("%s: verified with key %s, bound to log %s and agent %s", label, k.ID, p.Binding.LogOrigin, p.Binding.AgentID)
		return
	}
	rep.Unbound = append(rep.Unbound, record)
	rep.ok("%s: verified with key %s, but unbound: its v1 statement names no log or agent (not replay-protected)", label, k.ID)
}

// checkChallenge verifies a challenge's envelope, whose predicate is the
// whole challenge body (a v2 one's "body", bound to want), and holds the
// served challenge to it: the claim and run it names (sameClaim), outcome,
// agreement, hashes, notes and each comparison's rerun value.
func checkChallenge(ctx context.Context, k *attest.PublicKey, want attest.Binding, ch *dotlab.Challenge) error {
	st, err := attest.Open(ctx, k, ch.Envelope)
	if err != nil {
		return err
	}
	body, _, err := st.Record()
	if err != nil {
		return err
	}
	var b dotlab.ChallengeBody
	if err := json.Unmarshal(body, &b); err != nil {
		return dotlab.Errorf(dotlab.EINVALID, "$.envelope: predicate: %v", err)
	}
	b.Envelope = ch.Envelope
	if err := attest.VerifyChallenge(ctx, k, want, &b); err != nil {
		return err
	}
	if err := sameClaim(&b, ch); err != nil {
		return err
	}
	reruns := map[string]dotlab.Decimal{}
	for _, c := range b.Comparisons {
		reruns[c.Name] = c.Rerun
	}
	same := b.Outcome == ch.Outcome && b.Agrees != nil && *b.Agrees == ch.Agrees && b.Notes == ch.Notes &&
		maps.Equal(b.InputHashes, ch.InputHashes) && maps.Equal(b.OutputHashes, ch.OutputHashes)
	for _, c := range ch.Comparisons {
		if reruns[c.Name] != c.Rerun {
			same = false
		}
	}
	if !same {
		return dotlab.Errorf(dotlab.EINVALID, "the served challenge differs from the body its challenger signed")
	}
	return nil
}

// sameClaim holds a served challenge to the claim and run its signed body
// names (claim_id or run_id, and job_id when given): an operator must not
// file an agent's signed challenge of one claim under another.
func sameClaim(b *dotlab.ChallengeBody, ch *dotlab.Challenge) error {
	named := b.ClaimID
	if named == "" {
		named = b.RunID
	}
	if (b.ClaimID == "" && b.RunID == "") || (b.ClaimID != "" && b.ClaimID != ch.ClaimID) ||
		(b.RunID != "" && b.RunID != ch.RunID) || (b.JobID != "" && b.JobID != ch.ClaimID) {
		return dotlab.Errorf(dotlab.EINVALID, "its challenger signed it as a challenge of %q, not of %s (run %s): a signed challenge is filed under another claim", named, ch.ClaimID, ch.RunID)
	}
	return nil
}
