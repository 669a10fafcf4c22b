package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// publicWorld drives three claims through real lifecycle steps, 10 ms apart
// on the test clock:
//
//   - A: offered to decliner, declined ("no time today"); offered to runner,
//     accepted; runner joins the room and posts a finding; publishes
//     not_reproduced; challenger disagrees; three reviewers vote
//     challenger, runner, challenger → settled reproduced.
//   - C: offered to and accepted by runner2, spec_issue published in the
//     same millisecond → settled at once.
//   - B: offered to runner, ignored; the offer expires → funded again.
type publicWorld struct {
	*world
	runner, runner2, decliner, challenger *dotlab.Agent
	reviewers                             []*dotlab.Agent
	a, b, c                               string
	msgID, runID, chID                    string
	t0                                    time.Time
}

func newPublicWorld(t *testing.T, w *world) *publicWorld {
	ctx := context.Background()
	p := &publicWorld{world: w, t0: w.clock.Now()}
	p.runner, p.runner2 = mustAgent(t, w.db, "runner"), mustAgent(t, w.db, "runner2")
	p.decliner, p.challenger = mustAgent(t, w.db, "decliner"), mustAgent(t, w.db, "challenger")
	for i := 0; i < 3; i++ {
		p.reviewers = append(p.reviewers, mustAgent(t, w.db, fmt.Sprintf("reviewer%d", i)))
	}
	step := func() { w.clock.Advance(10 * time.Millisecond) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	c, err := sqlstoretest.Protocol(w.db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(t, "claim A"))
	must(err)
	p.a = c.ID
	step() // +10
	if j, found, err := sqlstoretest.Protocol(w.db).NextJob(ctx, p.decliner); err != nil || !found || j.ClaimID != p.a {
		t.Fatalf("draw decliner: %+v %v %v", j, found, err)
	}
	step() // +20
	_, err = sqlstoretest.Protocol(w.db).DeclineJob(ctx, p.decliner.ID, p.a, "no time today")
	must(err)
	step() // +30
	if j, found, err := sqlstoretest.Protocol(w.db).NextJob(ctx, p.runner); err != nil || !found || j.ClaimID != p.a {
		t.Fatalf("draw runner: %+v %v %v", j, found, err)
	}
	step() // +40
	_, err = sqlstoretest.Protocol(w.db).AcceptJob(ctx, p.runner.ID, p.a)
	must(err)
	step() // +50
	_, err = sqlstoretest.Protocol(w.db).JoinLab(ctx, p.runner.ID, p.a, "runner")
	must(err)
	m, err := sqlstoretest.Protocol(w.db).PostLabMessage(ctx, p.runner.ID, p.a, dotlab.LabMessageBody{Type: "finding", To: "all", Body: "sd_diff comes out at 1.2299"})
	must(err)
	p.msgID = m.ID
	step() // +60
	run, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, p.runner, sqlstoretest.RunBody(p.a, "1.58", "1.2299", dotlab.OutcomeNotReproduced), nil)
	must(err)
	p.runID = run.ID
	step() // +70
	body := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(p.a, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: p.a, Agrees: agree(false)}
	body.Notes = "sd_diff: my rerun gives 1.17 (dividing by n, as Student did); the run's 1.2299 differs by 0.0599"
	ch, err := sqlstoretest.Protocol(w.db).CreateChallenge(ctx, p.challenger, body, nil)
	must(err)
	p.chID = ch.ID
	rationale := "sd_diff: Student divides by n; 1.17 matches within 0.005, 1.2299 does not"
	for i, v := range []string{"challenger", "runner", "challenger"} {
		step() // +80, +90, +100
		if d, found, err := sqlstoretest.Protocol(w.db).NextDispute(ctx, p.reviewers[i].ID); err != nil || !found || d.ID != p.a {
			t.Fatalf("reviewer %d: %v %v", i, found, err)
		}
		_, err := sqlstoretest.Protocol(w.db).CastVote(ctx, p.reviewers[i], p.a, dotlab.VoteBody{Vote: v, Rationale: rationale})
		must(err)
	}
	if st := w.state(p.a); st.State != dotlab.StateSettled {
		t.Fatalf("A: %s", st.State)
	}

	step() // +110
	p.c = w.assigned("claim C", p.runner2)
	b := sqlstoretest.RunBody(p.c, "0", "0", dotlab.OutcomeSpecIssue)
	b.Comparisons = nil
	b.Notes = "results.json missing: analysis.py exited 1"
	_, err = sqlstoretest.Protocol(w.db).PublishRun(ctx, p.runner2, b, nil)
	must(err)

	step() // +120
	c, err = sqlstoretest.Protocol(w.db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(t, "claim B"))
	must(err)
	p.b = c.ID
	if j, found, err := sqlstoretest.Protocol(w.db).NextJob(ctx, p.runner); err != nil || !found || j.ClaimID != p.b {
		t.Fatalf("draw B: %+v %v %v", j, found, err)
	}
	w.clock.Advance(time.Second) // +1120
	if rep := w.settle(); rep.OffersExpired != 1 {
		t.Fatalf("expire: %v", rep)
	}
	return p
}

func (p *publicWorld) at(msec int) time.Time { return p.t0.Add(time.Duration(msec) * time.Millisecond) }

func TestClaimSummary(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		s, err := w.db.ClaimSummary(ctx, 0)
		if err != nil || s.Total != 0 || len(s.ClaimsByState) != len(dotlab.ClaimStates) || s.RecentlySettled == nil || len(s.RecentlySettled) != 0 {
			t.Fatalf("empty summary: %+v %v", s, err)
		}
		p := newPublicWorld(t, w)
		s, err = w.db.ClaimSummary(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s.Total != 3 || len(s.ClaimsByState) != len(dotlab.ClaimStates) {
			t.Fatalf("summary: %+v", s)
		}
		for _, st := range dotlab.ClaimStates {
			want := map[dotlab.ClaimState]int{dotlab.StateSettled: 2, dotlab.StateFunded: 1}[st]
			if n, ok := s.ClaimsByState[st]; !ok || n != want {
				t.Errorf("%s: %d (present %v), want %d", st, n, ok, want)
			}
		}
		if len(s.RecentlySettled) != 2 || s.RecentlySettled[0].ID != p.c || s.RecentlySettled[1].ID != p.a {
			t.Fatalf("recently settled: %v", ids(s.RecentlySettled))
		}
		for _, c := range s.RecentlySettled {
			if c.Manifest != nil || c.SettledAt == nil || c.State != dotlab.StateSettled {
				t.Fatalf("settled claim %s: manifest %v settled_at %v state %s", c.ID, c.Manifest != nil, c.SettledAt, c.State)
			}
		}
		if a := s.RecentlySettled[1]; !a.SettledAt.Equal(p.at(100)) || a.Outcome != dotlab.OutcomeReproduced || a.RunID != p.runID {
			t.Fatalf("A: settled %v outcome %s run %s", a.SettledAt, a.Outcome, a.RunID)
		}
		s, err = w.db.ClaimSummary(ctx, 1)
		if err != nil || len(s.RecentlySettled) != 1 || s.RecentlySettled[0].ID != p.c {
			t.Fatalf("recent=1: %v %v", s, err)
		}
		s, err = w.db.ClaimSummary(ctx, 500) // clamped to 50
		if err != nil || len(s.RecentlySettled) != 2 {
			t.Fatalf("recent=500: %v %v", s, err)
		}
	})
}

// TestClaimSummaryTies: claims settled in the same millisecond come newest
// id first.
func TestClaimSummaryTies(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner := mustAgent(t, w.db, "runner")
		var want []string
		for i := 0; i < 3; i++ {
			id := w.assigned(fmt.Sprintf("tie %d", i), runner)
			b := sqlstoretest.RunBody(id, "0", "0", dotlab.OutcomeSpecIssue)
			b.Comparisons = nil
			b.Notes = "results.json missing"
			if _, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, b, nil); err != nil {
				t.Fatal(err)
			}
			want = append([]string{id}, want...)
		}
		s, err := w.db.ClaimSummary(ctx, 10)
		if err != nil || strings.Join(ids(s.RecentlySettled), " ") != strings.Join(want, " ") {
			t.Fatalf("got %v, want %v (%v)", ids(s.RecentlySettled), want, err)
		}
	})
}

// TestLatestSettled: the feed's read gives the same claims in the same
// order as the summary, with their manifests, and bounds its limit to 1-50.
func TestLatestSettled(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cs, err := w.db.LatestSettled(ctx, 10)
		if err != nil || cs == nil || len(cs) != 0 {
			t.Fatalf("empty: %v %v", cs, err)
		}
		p := newPublicWorld(t, w)
		for _, limit := range []int{0, 2, 500} {
			cs, err = w.db.LatestSettled(ctx, limit)
			if err != nil || strings.Join(ids(cs), " ") != p.c+" "+p.a {
				t.Fatalf("limit %d: %v %v", limit, ids(cs), err)
			}
			for _, c := range cs {
				if c.Manifest == nil || c.Manifest.Source.Citation == "" || c.SettledAt == nil {
					t.Fatalf("%s: manifest %v settled_at %v", c.ID, c.Manifest, c.SettledAt)
				}
			}
		}
		if cs, err = w.db.LatestSettled(ctx, 1); err != nil || len(cs) != 1 || cs[0].ID != p.c {
			t.Fatalf("limit 1: %v %v", ids(cs), err)
		}
	})
}

func ids(cs []*dotlab.Claim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func TestAgentActivity(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		p := newPublicWorld(t, w)
		act := func(a *dotlab.Agent, limit int) []dotlab.Activity {
			t.Helper()
			out, err := w.db.AgentActivity(ctx, a.ID, limit)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		check := func(who string, got, want []dotlab.Activity) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: %d entries, want %d:\n%+v", who, len(got), len(want), got)
			}
			for i := range want {
				g, x := got[i], want[i]
				if g.Kind != x.Kind || g.ClaimID != x.ClaimID || g.Ref != x.Ref || g.Detail != x.Detail || !g.At.Equal(x.At) {
					t.Fatalf("%s[%d] = %+v, want %+v", who, i, g, x)
				}
			}
		}
		check("runner", act(p.runner, 0), []dotlab.Activity{
			{At: p.at(1120), Kind: "job_expired", ClaimID: p.b},
			{At: p.at(120), Kind: "job_offered", ClaimID: p.b},
			{At: p.at(60), Kind: "run", ClaimID: p.a, Ref: p.runID, Detail: "not_reproduced"},
			{At: p.at(50), Kind: "message", ClaimID: p.a, Ref: p.msgID, Detail: "finding"},
			{At: p.at(40), Kind: "job_accepted", ClaimID: p.a},
			{At: p.at(30), Kind: "job_offered", ClaimID: p.a},
		})
		check("runner limit 2", act(p.runner, 2), act(p.runner, 0)[:2])
		// Offer, accept and run in one millisecond: newest first is the
		// lifecycle reversed.
		c := w.state(p.c)
		check("runner2", act(p.runner2, 0), []dotlab.Activity{
			{At: p.at(110), Kind: "run", ClaimID: p.c, Ref: c.RunID, Detail: "spec_issue"},
			{At: p.at(110), Kind: "job_accepted", ClaimID: p.c},
			{At: p.at(110), Kind: "job_offered", ClaimID: p.c},
		})
		check("decliner", act(p.decliner, 0), []dotlab.Activity{
			{At: p.at(20), Kind: "job_declined", ClaimID: p.a, Detail: "no time today"},
			{At: p.at(10), Kind: "job_offered", ClaimID: p.a},
		})
		check("challenger", act(p.challenger, 0), []dotlab.Activity{
			{At: p.at(70), Kind: "challenge", ClaimID: p.a, Ref: p.chID, Detail: "reproduced"},
		})
		for i, side := range []string{"challenger", "runner", "challenger"} {
			check(p.reviewers[i].Name, act(p.reviewers[i], 500), []dotlab.Activity{
				{At: p.at(80 + 10*i), Kind: "vote", ClaimID: p.a, Detail: side},
			})
		}
		// The submitter has listed claims but no activity of these kinds.
		if got := act(w.sub, 0); got == nil || len(got) != 0 {
			t.Fatalf("submitter: %+v", got)
		}
		_, err := w.db.AgentActivity(ctx, "ag_nope", 10)
		wantCode(t, err, dotlab.ENOTFOUND)
	})
}

// TestAgentActivityAbandoned: an accepted job whose publish deadline passes
// shows the accept and the abandonment.
func TestAgentActivityAbandoned(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner := mustAgent(t, w.db, "runner")
		t0 := w.clock.Now()
		id := w.assigned("abandoned", runner)
		w.clock.Advance(2 * time.Second)
		if rep := w.settle(); rep.JobsAbandoned != 1 {
			t.Fatalf("abandon: %+v", rep)
		}
		got, err := w.db.AgentActivity(ctx, runner.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, a := range got {
			if a.ClaimID != id {
				t.Fatalf("claim %s", a.ClaimID)
			}
			kinds = append(kinds, a.Kind)
		}
		if strings.Join(kinds, " ") != "job_abandoned job_accepted job_offered" || !got[0].At.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("activity: %+v", got)
		}
	})
}
