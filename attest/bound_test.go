package attest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
)

// TestBoundStatementNamesLogAndAgent: a v2 statement verifies only for
// the log origin and agent id it names; the cheap Precheck refuses the
// same mismatches, naming the field, without the signature; Peek tells it
// from v1 and names the statement by the digest of its bytes, whichever
// base64 alphabet spells them.
func TestBoundStatementNamesLogAndAgent(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	here := attest.Binding{LogOrigin: "dotlab.a.example/log", AgentID: "ag_runner"}
	b := runBody()
	env, err := attest.SignBoundRun(ctx, k, here, b)
	if err != nil {
		t.Fatal(err)
	}
	b.Envelope = env
	if err := attest.VerifyRun(ctx, k.Public(), here, b); err != nil {
		t.Fatalf("own bound signature: %v", err)
	}
	elsewhere := attest.Binding{LogOrigin: "dotlab.b.example/log", AgentID: "ag_runner"}
	other := attest.Binding{LogOrigin: here.LogOrigin, AgentID: "ag_someone"}
	for _, c := range []struct {
		want attest.Binding
		says string
	}{
		{elsewhere, `predicate.log_origin is "dotlab.a.example/log", not "dotlab.b.example/log"`},
		{other, `predicate.agent_id is "ag_runner", not "ag_someone"`},
		{attest.Binding{AgentID: "ag_runner"}, "keeps no log"},
	} {
		wantInvalid(t, attest.VerifyRun(ctx, k.Public(), c.want, b), c.says)
		_, err := attest.Precheck(env, attest.RunRecord, c.want)
		wantInvalid(t, err, c.says)
	}
	// The binding is checked before the signature: a statement for another
	// log is refused as such even with a signature that would not verify.
	broken := *env
	broken.Signatures = []dotlab.Signature{{KeyID: env.Signatures[0].KeyID, Sig: base64.StdEncoding.EncodeToString(make([]byte, 64))}}
	_, err = attest.Precheck(&broken, attest.RunRecord, elsewhere)
	wantInvalid(t, err, "predicate.log_origin")
	bb := *b
	bb.Envelope = &broken
	wantInvalid(t, attest.VerifyRun(ctx, k.Public(), here, &bb), "signature does not verify")
	_, err = attest.Precheck(env, attest.ChallengeRecord, here)
	wantInvalid(t, err, "a challenge's is")

	p, err := attest.Precheck(env, attest.RunRecord, here)
	if err != nil || !p.Bound() || *p.Binding != here || p.PredicateType != attest.PredicateRunV2 || len(p.StatementSHA256) != 64 {
		t.Fatalf("peeked %+v, %v", p, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(env.Payload)
	url := *env
	url.Payload = base64.URLEncoding.EncodeToString(raw)
	if q, err := attest.Peek(&url); err != nil || q.StatementSHA256 != p.StatementSHA256 {
		t.Fatalf("the URL-safe spelling peeks as %+v, %v; want the same statement %s", q, err, p.StatementSHA256)
	}

	// Offline: Open reads the body and the binding.
	st, err := attest.Open(ctx, k.Public(), env)
	if err != nil {
		t.Fatal(err)
	}
	body, bind, err := st.Record()
	if err != nil || bind == nil || *bind != here || !strings.Contains(string(body), `"rerun":4.06212345670000000001`) {
		t.Fatalf("record %s, binding %+v, %v", body, bind, err)
	}
	changed := *b
	changed.Notes = "another note"
	wantInvalid(t, attest.VerifyRun(ctx, k.Public(), here, &changed), "predicate differs from the body")
}

// TestBoundChallengeAndVote: challenges and votes sign and verify bound
// the same way; a vote still names its dispute.
func TestBoundChallengeAndVote(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	here := attest.Binding{LogOrigin: "dotlab.a.example/log", AgentID: "ag_reviewer"}
	agrees := true
	ch := &dotlab.ChallengeBody{RunBody: *runBody(), ClaimID: "DL-0001", Agrees: &agrees}
	ch.JobID = ""
	ch.Envelope = must(attest.SignBoundChallenge(ctx, k, here, ch))
	if err := attest.VerifyChallenge(ctx, k.Public(), here, ch); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, attest.VerifyChallenge(ctx, k.Public(), attest.Binding{LogOrigin: "elsewhere", AgentID: here.AgentID}, ch), "predicate.log_origin")
	v := &dotlab.VoteBody{Vote: dotlab.VoteRunner, Rationale: "t: inside the tolerance", DisputeID: "DL-0002"}
	v.Envelope = must(attest.SignBoundVote(ctx, k, here, v))
	if err := attest.VerifyVote(ctx, k.Public(), here, "DL-0002", v); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, attest.VerifyVote(ctx, k.Public(), here, "DL-0003", v), "$.dispute_id")
	wantInvalid(t, attest.VerifyVote(ctx, k.Public(), attest.Binding{LogOrigin: here.LogOrigin, AgentID: "ag_x"}, "DL-0002", v), "predicate.agent_id")
	if _, err := attest.SignBoundVote(ctx, k, attest.Binding{AgentID: "ag_x"}, v); err == nil {
		t.Fatal("signed a bound vote naming no log")
	}
}

// TestOldEnvelopesStillVerify: envelopes signed with the v1 predicate
// types before v2 existed (testdata/signed-v1.json, made by the v1
// signer) still verify, whatever binding the verifier wants, and peek as
// unbound.
func TestOldEnvelopesStillVerify(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile("testdata/signed-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		PublicKey string               `json:"public_key"`
		Run       dotlab.RunBody       `json:"run"`
		Challenge dotlab.ChallengeBody `json:"challenge"`
		Vote      dotlab.VoteBody      `json:"vote"`
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	pub, err := attest.ParsePublicKey(fx.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	want := attest.Binding{LogOrigin: "dotlab.b.example/log", AgentID: "ag_anyone"}
	if err := attest.VerifyRun(ctx, pub, want, &fx.Run); err != nil {
		t.Errorf("v1 run: %v", err)
	}
	if err := attest.VerifyChallenge(ctx, pub, want, &fx.Challenge); err != nil {
		t.Errorf("v1 challenge: %v", err)
	}
	if err := attest.VerifyVote(ctx, pub, want, fx.Vote.DisputeID, &fx.Vote); err != nil {
		t.Errorf("v1 vote: %v", err)
	}
	for _, env := range []*dotlab.Envelope{fx.Run.Envelope, fx.Challenge.Envelope, fx.Vote.Envelope} {
		p, err := attest.Peek(env)
		if err != nil || p.Bound() || !strings.HasSuffix(p.PredicateType, "/v1") {
			t.Errorf("v1 envelope peeks as %+v, %v", p, err)
		}
		st, err := attest.Open(ctx, pub, env)
		if err != nil {
			t.Fatal(err)
		}
		if _, bind, err := st.Record(); err != nil || bind != nil {
			t.Errorf("v1 record binding %+v, %v", bind, err)
		}
	}
	changed := fx.Run
	changed.Outcome = dotlab.OutcomeNotReproduced
	wantInvalid(t, attest.VerifyRun(ctx, pub, want, &changed), "predicate differs from the body")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRecordKinds: each kind's predicate types are the published ones.
func TestRecordKinds(t *testing.T) {
	for r, want := range map[attest.Record][2]string{
		attest.RunRecord:       {attest.PredicateRun, attest.PredicateRunV2},
		attest.ChallengeRecord: {attest.PredicateChallenge, attest.PredicateChallengeV2},
		attest.VoteRecord:      {attest.PredicateVote, attest.PredicateVoteV2},
	} {
		if r.V1() != want[0] || r.V2() != want[1] {
			t.Errorf("%s: %s %s; want %s %s", r, r.V1(), r.V2(), want[0], want[1])
		}
	}
}
