package verify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// replaySide is one server of a replay: the key's owner registered there
// as its own agent, holding the jobs of the same two listings.
type replaySide struct {
	e      *env
	runner *client.Client
	me     *dotlab.AgentProfile
	origin string
	x, y   string // the two claims, DL-0001 and DL-0002 on each server
}

func newReplaySide(t *testing.T, engine sqlstore.Dialect, k *attest.Key) *replaySide {
	ctx := context.Background()
	e := newEnv(t, engine)
	sub := e.agent("submitter")
	n := dotlab.NewAgent{Name: "runner", Operator: "tests", Capabilities: []string{}}
	if err := agent.WithKeyProof(ctx, e.c, &n, k); err != nil {
		t.Fatal(err)
	}
	reg := must(e.c.Register(ctx, n))
	s := &replaySide{e: e, runner: e.c.WithKey(reg.APIKey), origin: e.db.Log().Origin()}
	s.x = must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("replayed listing"), "statistics")).ID
	s.y = must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("replayed listing v2"), "statistics")).ID
	for range 2 {
		j := must(s.runner.NextJob(ctx))
		must(s.runner.Accept(ctx, j.ClaimID))
	}
	s.me = must(s.runner.Me(ctx))
	return s
}

// TestReplayedEnvelopeRefused: the owner of a key registered on two
// servers (an agent on each, the same package listed on each, so the same
// run body passes either manifest) carries its signed run from A to B.
// Reproduced first with a v1 statement, which names no log: B accepts it,
// as before (agents signing v1 keep working), and `dotlab verify` on B
// reports it signed but unbound, never bound to B's log. A v2 statement
// made for A is refused on B naming predicate.log_origin, one naming B's
// log but A's agent id naming predicate.agent_id, and nothing is written;
// on A, the same envelope posted again (or respelled in the URL-safe
// alphabet) is refused as already posted, as is a bound challenge posted
// twice; the honest v2 run and challenge verify bound on A; and when B's operator files A's v2 envelope under B's run itself
// (through its store), `dotlab verify` on B fails naming the run.
func TestReplayedEnvelopeRefused(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) { replayedEnvelopeRefused(t, engine) })
	}
}

func replayedEnvelopeRefused(t *testing.T, engine sqlstore.Dialect) {
	ctx := context.Background()
	k := must(attest.GenerateKey())
	a, b := newReplaySide(t, engine, k), newReplaySide(t, engine, k)
	if a.origin == b.origin || a.x != b.x || a.y != b.y || a.me.ID == b.me.ID {
		t.Fatalf("servers %q/%q, claims %s %s / %s %s, agents %s %s", a.origin, b.origin, a.x, a.y, b.x, b.y, a.me.ID, b.me.ID)
	}

	// The attack, with a v1 statement: accepted on B, reported unbound.
	v1 := sqlstoretest.RunBody(a.x, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	v1.Envelope = must(attest.SignRun(ctx, k, v1))
	must(a.runner.PublishRun(ctx, v1))
	replayed := must(b.runner.PublishRun(ctx, v1))
	rep := b.e.verify(replayed.ID)
	wantPass(t, rep)
	if len(rep.Unbound) != 1 || rep.Unbound[0] != "run "+replayed.ID || rep.Signed != 1 {
		t.Fatalf("verify on B: unbound %q, signed %d; want the replayed v1 run unbound", rep.Unbound, rep.Signed)
	}
	var out strings.Builder
	rep.Print(&out, true)
	if strings.Contains(out.String(), "bound to log") || !strings.Contains(out.String(), "unbound: 1 signed record(s) name no log or agent") {
		t.Fatalf("verify on B reports the replayed v1 run as bound to its log, or not as unbound:\n%s", out.String())
	}

	// v2: bound to A's log and A's agent id.
	v2 := sqlstoretest.RunBody(a.y, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	v2.Envelope = must(attest.SignBoundRun(ctx, k, attest.Binding{LogOrigin: a.origin, AgentID: a.me.ID}, v2))
	_, err := b.runner.PublishRun(ctx, v2)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope: predicate.log_origin is \""+a.origin+"\", not \""+b.origin+"\"")
	other := *v2
	other.Envelope = must(attest.SignBoundRun(ctx, k, attest.Binding{LogOrigin: b.origin, AgentID: a.me.ID}, v2))
	_, err = b.runner.PublishRun(ctx, &other)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope: predicate.agent_id is \""+a.me.ID+"\", not \""+b.me.ID+"\"")
	if c := must(b.e.c.Claim(ctx, b.y)); c.State != dotlab.StateAssigned || c.RunID != "" {
		t.Fatalf("refused replays moved %s on B to %s (run %q)", b.y, c.State, c.RunID)
	}

	// On A: accepted once, then refused as already posted.
	run := must(a.runner.PublishRun(ctx, v2))
	_, err = a.runner.PublishRun(ctx, v2)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope: already posted", "run "+run.ID)
	raw := must(base64.StdEncoding.DecodeString(v2.Envelope.Payload))
	respelled := *v2
	respelled.Envelope = &dotlab.Envelope{PayloadType: v2.Envelope.PayloadType, Payload: base64.URLEncoding.EncodeToString(raw), Signatures: v2.Envelope.Signatures}
	_, err = a.runner.PublishRun(ctx, &respelled)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope: already posted", "run "+run.ID)
	_, err = a.runner.PublishRun(ctx, v1)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope: already posted")
	rep = a.e.verify(run.ID)
	wantPass(t, rep)
	if len(rep.Unbound) != 0 || !anyHas(rep.OK, "signature of run "+run.ID+": verified with key "+k.Public().ID+", bound to log "+a.origin+" and agent "+a.me.ID) {
		t.Fatalf("the v2 run on A is not reported bound:\n%s", strings.Join(rep.OK, "\n"))
	}

	// A challenge on A: bound to A and its challenger, posted once.
	challenger, chKey := a.e.signer("challenger")
	chMe := must(challenger.Me(ctx))
	agrees := true
	cb := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced), ClaimID: a.x, Agrees: &agrees}
	cb.Envelope = must(attest.SignBoundChallenge(ctx, chKey, attest.Binding{LogOrigin: a.origin, AgentID: chMe.ID}, cb))
	ch := must(challenger.Challenge(ctx, cb))
	_, err = challenger.Challenge(ctx, cb)
	wantRefused(t, err, dotlab.EINVALID, "$.envelope: already posted", "challenge "+ch.ID)
	rep = a.e.verify(a.x)
	wantPass(t, rep)
	if len(rep.Unbound) != 1 || rep.Unbound[0] != "run "+must(a.e.c.Claim(ctx, a.x)).RunID || !anyHas(rep.OK, "signature of challenge "+ch.ID+": verified with key "+chKey.Public().ID+", bound to log") {
		t.Fatalf("verify on A: unbound %q (want the v1 run only), the bound challenge:\n%s", rep.Unbound, strings.Join(rep.OK, "\n"))
	}

	// B's operator files A's v2 envelope under B's own run of the claim.
	forged := forgeRun(t, b.e.db, b.me.ID, v2, must(json.Marshal(v2)))
	wantFailure(t, b.e.verify(b.y), "signature of run "+forged.ID, "predicate.log_origin is \""+a.origin+"\"")
}

func anyHas(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
