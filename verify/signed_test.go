package verify_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/crypto/ssh"
)

func wantRefused(t *testing.T, err error, code string, says ...string) {
	t.Helper()
	if dotlab.ErrorCode(err) != code {
		t.Fatalf("got %v; want %s", err, code)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%v does not say %q", err, s)
		}
	}
}

// TestSignatureRefused: the server accepts an envelope only when it is the
// caller's signature of that very body; unsigned bodies are accepted and
// marked unsigned; a signed run verifies offline from the envelope and the
// agent's published key alone.
func TestSignatureRefused(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	ctx := context.Background()
	sub := e.agent("submitter")
	runner, key := e.signer("runner")
	_, otherKey := e.signer("another agent")
	c := must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("signed"), "statistics"))
	must(runner.NextJob(ctx))
	must(runner.Accept(ctx, c.ID))

	body := sqlstoretest.RunBody(c.ID, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	body.Envelope = must(attest.SignRun(ctx, otherKey, body))
	_, err := runner.PublishRun(ctx, body)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope", "is signed by key \""+otherKey.Public().ID)

	body.Envelope = must(attest.SignRun(ctx, key, body))
	changed := *body
	changed.Comparisons = []dotlab.RunComparison{{Name: "mean_diff", Rerun: "1.580"}, {Name: "sd_diff", Rerun: "1.2299"}}
	_, err = runner.PublishRun(ctx, &changed)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope", "predicate differs from the body")

	// Someone else's key relabelled as the runner's fails on the signature.
	forged := *body
	oenv := must(attest.SignRun(ctx, otherKey, body))
	forged.Envelope = &dotlab.Envelope{PayloadType: oenv.PayloadType, Payload: oenv.Payload,
		Signatures: []dotlab.Signature{{KeyID: key.Public().ID, Sig: oenv.Signatures[0].Sig}}}
	_, err = runner.PublishRun(ctx, &forged)
	wantRefused(t, err, dotlab.EINVALID, "signature does not verify")

	run := must(runner.PublishRun(ctx, body))
	if run.SignedBy != key.Public().ID {
		t.Fatalf("signed_by %q, want %q", run.SignedBy, key.Public().ID)
	}

	// Offline: the served envelope and the served key, nothing else.
	served := must(e.c.Run(ctx, run.ID))
	prof := must(e.c.Agent(ctx, run.RunnerID))
	pub := must(attest.ParsePublicKey(prof.PublicKey))
	if pub.ID != prof.KeyID || prof.KeyID != key.Public().ID {
		t.Fatalf("profile key %q id %q", prof.PublicKey, prof.KeyID)
	}
	st := must(attest.Open(ctx, pub, served.Body.Envelope))
	if st.PredicateType != attest.PredicateRun || len(st.Subject) != 1 || st.Subject[0].Name != "results.json" {
		t.Fatalf("statement %+v", st)
	}
	if err := attest.VerifyRun(ctx, pub, attest.Binding{}, &served.Body); err != nil {
		t.Fatalf("served run does not verify offline: %v", err)
	}

	// An agent that registered no key cannot sign; unsigned bodies pass.
	plain := must(e.c.Register(ctx, dotlab.NewAgent{Name: "literal agent", Operator: "tests"}))
	if plain.PublicKey != "" || plain.KeyID != "" {
		t.Fatalf("an agent without a key shows %q", plain.KeyID)
	}
	ch := e.c.WithKey(plain.APIKey)
	agrees := true
	cb := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced), ClaimID: c.ID, Agrees: &agrees}
	cb.Envelope = must(attest.SignChallenge(ctx, otherKey, cb))
	_, err = ch.Challenge(ctx, cb)
	wantRefused(t, err, dotlab.EINVALID, "registered no public key")
	cb.Envelope = nil
	posted := must(ch.Challenge(ctx, cb))
	if posted.SignedBy != "" || posted.Envelope != nil {
		t.Fatalf("an unsigned challenge shows signed by %q", posted.SignedBy)
	}

	// Keys: one agent per key, Ed25519 only.
	_, err = e.c.Register(ctx, dotlab.NewAgent{Name: "copycat", Operator: "tests", PublicKey: key.Public().Authorized})
	wantRefused(t, err, dotlab.EINVALID, "$.key_proof: registering a public key needs proof")
	twice := dotlab.NewAgent{Name: "second agent", Operator: "tests"}
	if err := agent.WithKeyProof(ctx, e.c, &twice, key); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.Register(ctx, twice)
	wantRefused(t, err, dotlab.ECONFLICT, "registered to another agent")
	_, err = e.c.Register(ctx, dotlab.NewAgent{Name: "garbled", Operator: "tests", PublicKey: "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7"})
	wantRefused(t, err, dotlab.EINVALID, "$.public_key: must be one OpenSSH public key line")
	if strings.Count(err.Error(), "$.public_key") != 1 {
		t.Fatalf("the detail repeats itself: %v", err)
	}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	sk, _ := ssh.NewPublicKey(&rk.PublicKey)
	_, err = e.c.Register(ctx, dotlab.NewAgent{Name: "rsa", Operator: "tests", PublicKey: string(ssh.MarshalAuthorizedKey(sk))})
	wantRefused(t, err, dotlab.EINVALID, "$.public_key: is a ssh-rsa key; DotLab verifies Ed25519 only")
}

// TestSignedVoteNamesItsDispute: a vote's dispute_id must be its path's,
// and a signed vote's rationale is signed as stored (trimmed).
func TestSignedVoteNamesItsDispute(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	ctx := context.Background()
	claimID, _ := e.lifecycleUntilDispute("vote binding")
	r, key := e.signer("late reviewer")
	d := must(r.NextDispute(ctx))
	v := dotlab.VoteBody{Vote: dotlab.VoteRunner, Rationale: "sd_diff: 1.2299 is the sample sd the paper prints", DisputeID: "DL-9999"}
	_, err := r.Vote(ctx, d.ID, v)
	wantRefused(t, err, dotlab.EINVALID, "$.dispute_id")
	v.DisputeID = d.ID
	v.Rationale += "  "
	v.Envelope = must(attest.SignVote(ctx, key, &v))
	_, err = r.Vote(ctx, d.ID, v)
	wantRefused(t, err, dotlab.EINVALID, "$.rationale", "white space")
	v.Rationale = strings.TrimSpace(v.Rationale)
	v.Envelope = must(attest.SignVote(ctx, key, &v))
	got := must(r.Vote(ctx, d.ID, v))
	if len(got.Votes) != 1 || got.Votes[0].SignedBy != key.Public().ID || claimID != d.ID {
		t.Fatalf("votes %+v", got.Votes)
	}
}

// lifecycleUntilDispute lists a claim, publishes its run and posts one
// disagreeing challenge.
func (e *env) lifecycleUntilDispute(title string) (claimID, runID string) {
	ctx := context.Background()
	sub, runner := e.agent("submitter "+title), e.agent("runner "+title)
	c := must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON(title), "statistics"))
	must(runner.NextJob(ctx))
	must(runner.Accept(ctx, c.ID))
	run := must(runner.PublishRun(ctx, sqlstoretest.RunBody(c.ID, "1.58", "1.2299", dotlab.OutcomeNotReproduced)))
	b := sqlstoretest.RunBody("", "1.58", "1.17", dotlab.OutcomeReproduced)
	b.Notes = "sd_diff: 1.17 (divide by n) vs the run's 1.2299, difference 0.0599"
	disagree := false
	must(e.agent("challenger "+title).Challenge(ctx, &dotlab.ChallengeBody{RunBody: *b, ClaimID: c.ID, Agrees: &disagree}))
	return c.ID, run.ID
}

// TestSignatureTampering: a signature stripped from a run, a signer's key
// swapped in the database and a vote's envelope replaced are each caught
// by `dotlab verify`, naming the record.
func TestSignatureTampering(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	ctx := context.Background()
	claimID, runID := e.lifecycle("signed tamper")
	rep := e.verify(claimID)
	wantPass(t, rep)
	signed := 0
	for _, ok := range rep.OK {
		if strings.Contains(ok, "verified with key SHA256:") {
			signed++
		}
	}
	if signed != 1+1+3 || rep.Signed != signed || len(rep.Unsigned) != 1 || !strings.HasPrefix(rep.Unsigned[0], "challenge ch_") {
		t.Fatalf("%d signatures verified (counted %d), unsigned %q; want 5 (run, disagreeing challenge, 3 votes) and the agreeing challenge unsigned:\n%s",
			signed, rep.Signed, rep.Unsigned, strings.Join(rep.OK, "\n"))
	}
	if len(rep.Unbound) != 2 || !strings.HasPrefix(rep.Unbound[0], "run run_") || !strings.HasPrefix(rep.Unbound[1], "challenge ch_") {
		t.Fatalf("unbound %q; want the v1 run and challenge (the v2 votes are bound)", rep.Unbound)
	}
	var out strings.Builder
	rep.Print(&out, false)
	if !strings.Contains(out.String(), "signatures: 5 record(s) signed and verified, 1 unsigned (challenge ch_") ||
		!strings.Contains(out.String(), "unbound: 2 signed record(s) name no log or agent (v1 statements: run run_") {
		t.Fatalf("report without -v:\n%s", out.String())
	}
	raw := rawDB(t, e)

	// The operator swaps the runner's key for one of its own.
	run := must(e.c.Run(ctx, runID))
	_, evil := e.signer("operator's key")
	if _, err := raw.Exec(`UPDATE agents SET public_key = 'x' || id, keyid = NULL WHERE keyid = $1`, evil.Public().ID); err != nil {
		t.Fatal(err)
	}
	var oldKey, oldID string
	raw.QueryRow(`SELECT public_key, keyid FROM agents WHERE id = $1`, run.RunnerID).Scan(&oldKey, &oldID)
	if _, err := raw.Exec(`UPDATE agents SET public_key = $1, keyid = $2 WHERE id = $3`, evil.Public().Authorized, evil.Public().ID, run.RunnerID); err != nil {
		t.Fatal(err)
	}
	wantFailure(t, e.verify(runID), "signature of run "+runID, "does not verify", "is signed by key \""+oldID)
	raw.Exec(`UPDATE agents SET public_key = $1, keyid = $2 WHERE id = $3`, oldKey, oldID, run.RunnerID)
	wantPass(t, e.verify(runID))

	// The operator strips the run's signature.
	if _, err := raw.Exec(`UPDATE runs SET body = json_remove(body, '$.envelope') WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	e.restart()
	wantFailure(t, e.verify(claimID), "the signature "+tlogfmt.EnvelopeID(tlogfmt.TypeRun, runID), "is missing from the server's records")
	wantFailure(t, e.verify(runID), "the signature "+tlogfmt.EnvelopeID(tlogfmt.TypeRun, runID), "is missing")

	// The operator replaces a vote's envelope with one it signed itself.
	d := must(e.c.Dispute(ctx, claimID))
	vt := d.Votes[0]
	fake := dotlab.VoteBody{Vote: vt.Vote, Rationale: vt.Rationale, DisputeID: claimID}
	env := must(attest.SignVote(ctx, evil, &fake))
	data := must(jsonText(env))
	if _, err := raw.Exec(`UPDATE votes SET envelope = $1 WHERE claim_id = $2 AND reviewer_id = $3`, data, claimID, vt.ReviewerID); err != nil {
		t.Fatal(err)
	}
	rep = e.verify(claimID)
	wantFailure(t, rep, "signature of the vote of "+vt.ReviewerID, "differs from its log entry")
	wantFailure(t, rep, "signature of the vote of "+vt.ReviewerID, "does not verify")
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestSignedRecordsStayOnTheirClaim: an operator who files an agent's
// signed run or challenge of one claim under another claim — a relisting of
// the same package, whose manifest accepts the same body — logs both
// consistently, so only the signed statement can tell: it names the claim
// it was made for (a run's job_id, a challenge's claim_id or run_id), and
// `dotlab verify` fails the signature of a record filed elsewhere.
func TestSignedRecordsStayOnTheirClaim(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) { signedRecordsStayOnTheirClaim(t, newEnv(t, engine)) })
	}
}

func signedRecordsStayOnTheirClaim(t *testing.T, e *env) {
	ctx := context.Background()
	sub := e.agent("submitter")
	runner, key := e.signer("runner")
	challenger, chKey := e.signer("challenger")
	x := must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("first listing"), "statistics"))
	y := must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("second listing"), "statistics"))
	for range 2 {
		j := must(runner.NextJob(ctx))
		must(runner.Accept(ctx, j.ClaimID))
	}
	me := must(runner.Me(ctx))
	chMe := must(challenger.Me(ctx))

	// Honest: the runner signs and publishes its run of x; a challenger
	// signs and posts its challenge of that run.
	rb := sqlstoretest.RunBody(x.ID, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	rb.Envelope = must(attest.SignRun(ctx, key, rb))
	must(runner.PublishRun(ctx, rb))
	agrees := true
	cb := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced), ClaimID: x.ID, Agrees: &agrees}
	cb.Envelope = must(attest.SignChallenge(ctx, chKey, cb))
	must(challenger.Challenge(ctx, cb))
	wantPass(t, e.verify(x.ID))

	// The operator files both under y, through its own store (past the
	// protocol service: forge_test.go), the bodies
	// stored (and logged) byte for byte as signed.
	rawRun := must(json.Marshal(rb))
	moved := *rb
	moved.JobID = y.ID
	run := forgeRun(t, e.db, me.ID, &moved, rawRun)
	rawCh := must(json.Marshal(cb))
	movedCh := *cb
	movedCh.ClaimID = y.ID
	ch := forgeChallenge(t, e.db, chMe.ID, &movedCh, rawCh)

	rep := e.verify(y.ID)
	wantFailure(t, rep, "signature of run "+run.ID, x.ID)
	wantFailure(t, rep, "signature of challenge "+ch.ID, x.ID)
}
