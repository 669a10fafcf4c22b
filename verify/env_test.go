package verify_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/verify"
)

// env is a real server (store, API, log) on one database that a test can
// stop and start again, as an operator restarting it would.
type env struct {
	t     *testing.T
	url   string
	clock *sqlstoretest.Clock
	db    *sqlstore.DB
	api   *httpapi.Server
	srv   *httptest.Server
	c     *client.Client
	path  string // the witness file (this machine's config dir)
	addr  string // where the server listens, kept across restarts
}

func newEnv(t *testing.T, engine sqlstore.Dialect) *env {
	e := &env{t: t, url: sqlstoretest.URL(t, engine), clock: sqlstoretest.NewClock(), path: filepath.Join(t.TempDir(), "logs.json")}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	db, err := sqlstore.Open(context.Background(), e.url, sqlstore.Options{Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Store: db, Clock: e.clock, Version: "test", Leaks: servertest.Leaks(e.t), Log: db.Log()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.db, e.api, e.srv = db, api, httptest.NewUnstartedServer(api)
	if e.addr != "" { // a restart listens where the server was
		var ln net.Listener
		for i := 0; ; i++ { // the old socket may linger a moment
			if ln, err = net.Listen("tcp", e.addr); err == nil || i == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			e.t.Fatal(err)
		}
		e.srv.Listener.Close()
		e.srv.Listener = ln
	}
	e.srv.Start()
	e.addr = e.srv.Listener.Addr().String()
	if e.c, err = client.New(e.srv.URL, ""); err != nil {
		e.t.Fatal(err)
	}
	e.c.Retries = 0
}

// restart stops the server and starts it again on the same database and
// address, as after a change made behind its back (a row rewritten in the
// database), which its read cache does not see until then.
func (e *env) restart() {
	e.stop()
	e.start()
}

func (e *env) stop() {
	if e.srv == nil {
		return
	}
	e.api.Close()
	e.srv.Close()
	e.db.Close()
	e.srv = nil
}

// verify runs `dotlab verify` for target against the server.
func (e *env) verify(target string) *verify.Report {
	e.t.Helper()
	v := verify.Verifier{Client: e.c, Witness: verify.Witness{Path: e.path}}
	check := v.Run
	if dotlab.ValidClaimID(target) {
		check = v.Claim
	}
	rep, err := check(context.Background(), target)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func (e *env) agent(name string) *client.Client {
	c, _ := e.signer(name)
	return c
}

// signer registers name with a new signing key (as `dotlab agent
// register` does) and returns its client and key.
func (e *env) signer(name string) (*client.Client, *attest.Key) {
	e.t.Helper()
	a, k, err := agent.RegisterSigned(context.Background(), e.c, dotlab.NewAgent{Name: name, Operator: "tests", Capabilities: []string{}})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.c.WithKey(a.APIKey), k
}

// must returns v, or panics (failing the test) on a protocol step's error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// lifecycle runs a claim through every kind of record: listing, an offer
// taken, lab messages, a run (signed v1), an agreeing (unsigned) and a
// disagreeing (signed v1) challenge, three votes (signed v2) and the
// settlement. It returns the claim and run ids.
func (e *env) lifecycle(title string) (claimID, runID string) {
	t, ctx := e.t, context.Background()
	sub, helper := e.agent("submitter "+title), e.agent("helper "+title)
	runner, runnerKey := e.signer("runner " + title)
	c := must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON(title), "statistics"))
	must(runner.NextJob(ctx))
	must(runner.Accept(ctx, c.ID))
	must(runner.JoinLab(ctx, c.ID, "runner"))
	must(helper.JoinLab(ctx, c.ID, "collaborator"))
	for i := range 3 {
		must(helper.Post(ctx, c.ID, dotlab.LabMessageBody{Type: "note", To: "all", Body: fmt.Sprintf("note %d on %s", i, title)}))
	}
	rb := sqlstoretest.RunBody(c.ID, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	rb.Envelope = must(attest.SignRun(ctx, runnerKey, rb))
	run := must(runner.PublishRun(ctx, rb))
	agree, disagree := true, false
	for i, agrees := range []*bool{&agree, &disagree} {
		b := sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced)
		notes := ""
		if !*agrees {
			b = sqlstoretest.RunBody("", "1.58", "1.17", dotlab.OutcomeReproduced)
			notes = "sd_diff: 1.17 (divide by n) vs the run's 1.2299, difference 0.0599"
		}
		b.Notes = notes
		ch, key := e.signer(fmt.Sprintf("challenger%d %s", i, title))
		body := &dotlab.ChallengeBody{RunBody: *b, ClaimID: c.ID, Agrees: agrees}
		if !*agrees { // the agreeing challenge stays unsigned, as a literal agent's would
			body.Envelope = must(attest.SignChallenge(ctx, key, body))
		}
		must(ch.Challenge(ctx, body))
	}
	for i, side := range []string{"challenger", "challenger", "runner"} {
		r, key := e.signer(fmt.Sprintf("reviewer%d %s", i, title))
		d := must(r.NextDispute(ctx))
		v := dotlab.VoteBody{Vote: side, Rationale: "sd_diff: Student divides by n, so 1.17 is the published quantity", DisputeID: d.ID}
		// The votes are bound (v2) to this log and their reviewer; the run
		// and the disagreeing challenge stay v1, as agents signing before
		// v2 send them.
		bind := attest.Binding{LogOrigin: e.db.Log().Origin(), AgentID: must(r.Me(ctx)).ID}
		v.Envelope = must(attest.SignBoundVote(ctx, key, bind, &v))
		must(r.Vote(ctx, d.ID, v))
	}
	if got := must(e.c.Claim(ctx, c.ID)); got.State != dotlab.StateSettled {
		t.Fatalf("claim %s is %s, want settled", c.ID, got.State)
	}
	return c.ID, run.ID
}
