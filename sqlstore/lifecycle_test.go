package sqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// Second-long windows, driven by a settable clock.
var fast = dotlab.Windows{Accept: time.Second, Publish: time.Second, Challenge: time.Second, Quorum: 3}

type world struct {
	t     *testing.T
	db    *sqlstore.DB
	clock *sqlstoretest.Clock
	sub   *dotlab.Agent
}

func forEachWorld(t *testing.T, fn func(t *testing.T, w *world)) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			clock := sqlstoretest.NewClock()
			db := sqlstoretest.Open(t, e, sqlstore.Options{Clock: clock, Windows: fast})
			w := &world{t: t, db: db, clock: clock}
			w.sub = mustAgent(t, db, "submitter")
			fn(t, w)
		})
	}
}

// assigned lists a claim and has runner accept it.
func (w *world) assigned(title string, runner *dotlab.Agent) string {
	w.t.Helper()
	ctx := context.Background()
	c, err := sqlstoretest.Protocol(w.db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(w.t, title))
	if err != nil {
		w.t.Fatal(err)
	}
	j, found, err := sqlstoretest.Protocol(w.db).NextJob(ctx, runner)
	if err != nil || !found || j.ClaimID != c.ID {
		w.t.Fatalf("draw: %+v %v %v", j, found, err)
	}
	if _, err := sqlstoretest.Protocol(w.db).AcceptJob(ctx, runner.ID, c.ID); err != nil {
		w.t.Fatal(err)
	}
	return c.ID
}

func (w *world) state(id string) *dotlab.Claim {
	w.t.Helper()
	c, err := w.db.FindClaim(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func (w *world) settle() dotlab.SettleReport {
	w.t.Helper()
	rep, err := sqlstoretest.Protocol(w.db).Settle(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return rep
}

func agree(b bool) *bool { return &b }

func TestLifecycleReproducedSettlesWhenWindowCloses(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner, checker := mustAgent(t, w.db, "runner"), mustAgent(t, w.db, "checker")
		id := w.assigned("reproduced", runner)
		if _, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), nil); err != nil {
			t.Fatal(err)
		}
		// An agreeing challenge does not open a dispute.
		body := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.581", "1.171", dotlab.OutcomeReproduced), ClaimID: id, Agrees: agree(true)}
		if _, err := sqlstoretest.Protocol(w.db).CreateChallenge(ctx, checker, body, nil); err != nil {
			t.Fatal(err)
		}
		if rep := w.settle(); rep.ClaimsSettled != 0 {
			t.Fatalf("settled before the window closed: %v", rep)
		}
		w.clock.Advance(time.Second)
		if rep := w.settle(); rep.ClaimsSettled != 1 {
			t.Fatalf("window closed: %v", rep)
		}
		c := w.state(id)
		if c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeReproduced {
			t.Fatalf("claim: %s %s", c.State, c.Outcome)
		}
		if rep := w.settle(); !rep.Empty() {
			t.Fatalf("settlement not idempotent: %v", rep)
		}
		if r, _ := w.db.FindRun(ctx, c.RunID); r.SettledOutcome != dotlab.OutcomeReproduced || r.Overturned || r.DisputeID != "" {
			t.Fatalf("upheld run: %+v", r)
		}
		p, _ := w.db.FindAgent(ctx, runner.ID)
		q, _ := w.db.FindAgent(ctx, checker.ID)
		if p.Standing != dotlab.WeightRunUpheld || q.Standing != dotlab.WeightChallengeConfirm {
			t.Fatalf("standing: runner %v checker %v", p.Standing, q.Standing)
		}
	})
}

func TestLifecycleDisputeSettledByMajority(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner, challenger := mustAgent(t, w.db, "runner"), mustAgent(t, w.db, "challenger")
		var reviewers []*dotlab.Agent
		for i := 0; i < 4; i++ {
			reviewers = append(reviewers, mustAgent(t, w.db, fmt.Sprintf("reviewer%d", i)))
		}
		id := w.assigned("dispute", runner)
		// The runner divides by n-1: sd 1.2299 → not_reproduced.
		run, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced), nil)
		if err != nil {
			t.Fatal(err)
		}
		if run.SettledOutcome != "" || run.Overturned || run.DisputeID != "" || run.OverturnedBy != "" {
			t.Fatalf("fresh run settled already: %+v", run)
		}
		// Role rules: the runner and the submitter cannot challenge.
		body := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: id, Agrees: agree(false)}
		_, err = sqlstoretest.Protocol(w.db).CreateChallenge(ctx, runner, body, nil)
		wantCode(t, err, dotlab.EROLECONFLICT)
		_, err = sqlstoretest.Protocol(w.db).CreateChallenge(ctx, w.sub, body, nil)
		wantCode(t, err, dotlab.EROLECONFLICT)
		// agrees must match the outcomes.
		body.Agrees = agree(true)
		_, err = sqlstoretest.Protocol(w.db).CreateChallenge(ctx, challenger, body, nil)
		wantCode(t, err, dotlab.EINVALID)
		// A disagreement must name the differing comparison and by how much.
		body.Agrees = agree(false)
		body.Notes = "I disagree."
		_, err = sqlstoretest.Protocol(w.db).CreateChallenge(ctx, challenger, body, nil)
		wantCode(t, err, dotlab.EINVALID)
		body.Notes = "sd_diff: my rerun gives 1.17 (dividing by n, as Student did); the run's 1.2299 differs by 0.0599"
		ch, err := sqlstoretest.Protocol(w.db).CreateChallenge(ctx, challenger, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Differences) != 2 || ch.Differences[1].Delta != "-0.0599" {
			t.Fatalf("differences: %+v", ch.Differences)
		}
		_, err = sqlstoretest.Protocol(w.db).CreateChallenge(ctx, challenger, body, nil)
		wantCode(t, err, dotlab.ECONFLICT)
		if c := w.state(id); c.State != dotlab.StateDisputed {
			t.Fatalf("state %s, want disputed", c.State)
		}
		if r, _ := w.db.FindRun(ctx, run.ID); r.DisputeID != id || r.Overturned || r.SettledOutcome != "" {
			t.Fatalf("disputed run: %+v", r)
		}
		// The window closing does not settle a dispute.
		w.clock.Advance(2 * time.Second)
		w.settle()
		// Reviewers: never a claim they hold a role on.
		if _, found, _ := sqlstoretest.Protocol(w.db).NextDispute(ctx, challenger.ID); found {
			t.Fatal("challenger shown its own dispute")
		}
		d, found, err := sqlstoretest.Protocol(w.db).NextDispute(ctx, reviewers[0].ID)
		if err != nil || !found || d.ID != id || len(d.Challenges) != 1 || d.Run == nil {
			t.Fatalf("dispute: %+v %v %v", d, found, err)
		}
		_, err = sqlstoretest.Protocol(w.db).CastVote(ctx, reviewers[0], id, dotlab.VoteBody{Vote: "challenger", Rationale: "too short"})
		wantCode(t, err, dotlab.EINVALID)
		_, err = sqlstoretest.Protocol(w.db).CastVote(ctx, runner, id, dotlab.VoteBody{Vote: "runner", Rationale: "I stand by my run, sd_diff 1.2299 is right"})
		wantCode(t, err, dotlab.EROLECONFLICT)
		rationale := "sd_diff: Student divides by n; 1.17 matches within 0.005, 1.2299 does not"
		// Only reviewers the draw assigned may vote: one not drawn holds no
		// role, so it is not offered the dispute (409, issue 26).
		_, err = sqlstoretest.Protocol(w.db).CastVote(ctx, reviewers[1], id, dotlab.VoteBody{Vote: "runner", Rationale: rationale})
		wantCode(t, err, dotlab.ENOTOFFERED)
		for i, v := range []string{"challenger", "runner", "challenger"} {
			if i > 0 {
				if d, found, _ := sqlstoretest.Protocol(w.db).NextDispute(ctx, reviewers[i].ID); !found || d.ID != id {
					t.Fatalf("reviewer %d not assigned", i)
				}
			}
			if _, err := sqlstoretest.Protocol(w.db).CastVote(ctx, reviewers[i], id, dotlab.VoteBody{Vote: v, Rationale: rationale}); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				_, err := sqlstoretest.Protocol(w.db).CastVote(ctx, reviewers[0], id, dotlab.VoteBody{Vote: v, Rationale: rationale})
				wantCode(t, err, dotlab.ECONFLICT)
			}
		}
		c := w.state(id)
		if c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeReproduced {
			t.Fatalf("after votes: %s %s", c.State, c.Outcome)
		}
		if _, found, _ := sqlstoretest.Protocol(w.db).NextDispute(ctx, reviewers[3].ID); found {
			t.Fatal("settled dispute still drawn")
		}
		// The run record says how the claim settled against it, keeping its own outcome.
		r, _ := w.db.FindRun(ctx, run.ID)
		if r.Outcome != dotlab.OutcomeNotReproduced || r.SettledOutcome != dotlab.OutcomeReproduced || !r.Overturned ||
			r.DisputeID != id || r.OverturnedBy != ch.ID {
			t.Fatalf("overturned run: %+v", r)
		}
		if rs, _ := w.db.FindRuns(ctx, dotlab.Page{State: dotlab.StateSettled}); len(rs) != 1 || !rs[0].Overturned || rs[0].SettledOutcome != dotlab.OutcomeReproduced {
			t.Fatalf("listed: %+v", *rs[0])
		}
		if p, _ := w.db.FindAgent(ctx, runner.ID); p.RunsOverturned != 1 || p.RunsUpheld != 0 || p.Outcomes[dotlab.OutcomeNotReproduced] != 1 {
			t.Fatalf("runner profile: %+v", p)
		}
		ev, _ := w.db.ClaimEvents(ctx, id, 0)
		var states []dotlab.ClaimState
		for _, e := range ev {
			states = append(states, e.State)
		}
		want := fmt.Sprint([]dotlab.ClaimState{"listed", "funded", "assigned", "published", "challenge_window", "disputed", "reviewed", "settled"})
		if fmt.Sprint(states) != want {
			t.Fatalf("history %v, want %s", states, want)
		}
		// Standing follows the record: overturned run, useful challenge, votes.
		for agent, want := range map[string]float64{
			runner.ID:       dotlab.WeightRunOverturned,
			challenger.ID:   dotlab.WeightChallengeUseful,
			reviewers[0].ID: dotlab.WeightVoteMajority,
			reviewers[1].ID: dotlab.WeightVoteAgainst,
		} {
			p, _ := w.db.FindAgent(ctx, agent)
			if p.Standing != want {
				t.Errorf("%s standing %v, want %v", p.Name, p.Standing, want)
			}
		}
	})
}

func TestLifecycleSpecIssueAndInputMismatchSettleDirectly(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner := mustAgent(t, w.db, "runner")
		id := w.assigned("spec issue", runner)
		b := sqlstoretest.RunBody(id, "0", "0", dotlab.OutcomeSpecIssue)
		b.Comparisons = nil
		b.Notes = "results.json missing: analysis.py exited 1"
		if _, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, b, nil); err != nil {
			t.Fatal(err)
		}
		if c := w.state(id); c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeSpecIssue {
			t.Fatalf("spec_issue: %s %s", c.State, c.Outcome)
		}
		id = w.assigned("input mismatch", runner)
		b = sqlstoretest.RunBody(id, "0", "0", dotlab.OutcomeInputMismatch)
		b.Comparisons = nil
		b.Notes = "sleep.csv hash differs"
		_, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, b, nil) // hashes equal the manifest's
		wantCode(t, err, dotlab.EINVALID)
		b.InputHashes["sleep"] = "0000000000000000000000000000000000000000000000000000000000000000"
		if _, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, b, nil); err != nil {
			t.Fatal(err)
		}
		if c := w.state(id); c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeInputMismatch {
			t.Fatalf("input_mismatch: %s %s", c.State, c.Outcome)
		}
	})
}

func TestLifecycleIgnoredOfferAndAbandonedJobReturnToPool(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		lazy, slow, good := mustAgent(t, w.db, "lazy"), mustAgent(t, w.db, "slow"), mustAgent(t, w.db, "good")
		c, _ := sqlstoretest.Protocol(w.db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(t, "pool"))
		if _, found, _ := sqlstoretest.Protocol(w.db).NextJob(ctx, lazy); !found {
			t.Fatal("no offer")
		}
		if _, found, _ := sqlstoretest.Protocol(w.db).NextJob(ctx, slow); found {
			t.Fatal("claim offered twice")
		}
		w.clock.Advance(time.Second)
		if rep := w.settle(); rep.OffersExpired != 1 {
			t.Fatalf("expire: %v", rep)
		}
		j, found, _ := sqlstoretest.Protocol(w.db).NextJob(ctx, slow)
		if !found || j.ClaimID != c.ID {
			t.Fatal("expired offer not back in the pool")
		}
		sqlstoretest.Protocol(w.db).AcceptJob(ctx, slow.ID, c.ID)
		if _, err := sqlstoretest.Protocol(w.db).JoinLab(ctx, slow.ID, c.ID, "runner"); err != nil {
			t.Fatal(err)
		}
		if s := w.state(c.ID).State; s != dotlab.StateRunning {
			t.Fatalf("after runner joins: %s", s)
		}
		w.clock.Advance(time.Second)
		if rep := w.settle(); rep.JobsAbandoned != 1 {
			t.Fatalf("abandon: %v", rep)
		}
		if s := w.state(c.ID); s.State != dotlab.StateFunded || s.RunnerID != "" {
			t.Fatalf("abandoned claim: %s %s", s.State, s.RunnerID)
		}
		p, _ := w.db.FindAgent(ctx, slow.ID)
		if p.Abandoned != 1 || p.Standing != dotlab.WeightAbandoned {
			t.Fatalf("abandoner profile: %+v", p)
		}
		// Neither the lazy nor the slow agent is offered it again; a third is.
		for _, a := range []*dotlab.Agent{lazy, slow} {
			if _, found, _ := sqlstoretest.Protocol(w.db).NextJob(ctx, a); found {
				t.Fatalf("%s offered the claim again", a.Name)
			}
		}
		if j, found, _ := sqlstoretest.Protocol(w.db).NextJob(ctx, good); !found || j.ClaimID != c.ID {
			t.Fatal("abandoned claim not back in the pool")
		}
	})
}

// TestSettlementAfterRestart: what fell due while no server ran is done by
// the first Settle of the next process on the same database.
func TestSettlementAfterRestart(t *testing.T) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			ctx := context.Background()
			url := sqlstoretest.URL(t, e)
			clock := sqlstoretest.NewClock()
			db, err := sqlstore.Open(ctx, url, sqlstore.Options{Clock: clock, Windows: fast})
			if err != nil {
				t.Fatal(err)
			}
			w := &world{t: t, db: db, clock: clock, sub: mustAgent(t, db, "submitter")}
			runner := mustAgent(t, db, "runner")
			id := w.assigned("restart", runner)
			if _, err := sqlstoretest.Protocol(db).PublishRun(ctx, runner, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), nil); err != nil {
				t.Fatal(err)
			}
			db.Close() // the server stops
			clock.Advance(time.Hour)
			db2, err := sqlstore.Open(ctx, url, sqlstore.Options{Clock: clock, Windows: fast})
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			rep, err := sqlstoretest.Protocol(db2).Settle(ctx)
			if err != nil || rep.ClaimsSettled != 1 {
				t.Fatalf("after restart: %v %v", rep, err)
			}
			c, _ := db2.FindClaim(ctx, id)
			if c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeReproduced {
				t.Fatalf("claim: %s %s", c.State, c.Outcome)
			}
		})
	}
}

// TestTwoProcessesSettleEachClaimOnce: two stores (as two server processes)
// on one PostgreSQL database settle concurrently; each due claim settles
// exactly once (one "settled" event, counted once across both reports).
func TestTwoProcessesSettleEachClaimOnce(t *testing.T) {
	ctx := context.Background()
	url := sqlstoretest.URL(t, sqlstore.Postgres)
	clock := sqlstoretest.NewClock()
	open := func() *sqlstore.DB {
		db, err := sqlstore.Open(ctx, url, sqlstore.Options{Clock: clock, Windows: fast})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	w := &world{t: t, db: a, clock: clock, sub: mustAgent(t, a, "submitter")}
	const n = 40
	var ids []string
	for i := 0; i < n; i++ {
		runner := mustAgent(t, a, fmt.Sprintf("runner%d", i))
		id := w.assigned(fmt.Sprintf("due %d", i), runner)
		if _, err := sqlstoretest.Protocol(a).PublishRun(ctx, runner, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	reps := make([]dotlab.SettleReport, 4)
	for i := range reps {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			db := a
			if i%2 == 1 {
				db = b
			}
			rep, err := sqlstoretest.Protocol(db).Settle(ctx)
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		}(i)
	}
	wg.Wait()
	total := 0
	for _, r := range reps {
		total += r.ClaimsSettled
	}
	if total != n {
		t.Fatalf("settled %d times in all, want %d: %v", total, n, reps)
	}
	for _, id := range ids {
		ev, err := a.ClaimEvents(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		settled := 0
		for _, e := range ev {
			if e.State == dotlab.StateSettled {
				settled++
			}
		}
		if settled != 1 {
			t.Fatalf("%s settled %d times", id, settled)
		}
	}
}

func TestLabRooms(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner, helper, stranger := mustAgent(t, w.db, "runner"), mustAgent(t, w.db, "helper"), mustAgent(t, w.db, "stranger")
		id := w.assigned("lab", runner)
		_, err := sqlstoretest.Protocol(w.db).JoinLab(ctx, helper.ID, id, "runner")
		wantCode(t, err, dotlab.EROLECONFLICT)
		// The submitter joins its own room as submitter (answering
		// questions), never as runner, and takes no other role.
		if m, err := sqlstoretest.Protocol(w.db).JoinLab(ctx, w.sub.ID, id, "collaborator"); err != nil || m.Role != dotlab.RoleSubmitter {
			t.Fatalf("submitter joins: %+v %v", m, err)
		}
		_, err = sqlstoretest.Protocol(w.db).JoinLab(ctx, w.sub.ID, id, "runner")
		wantCode(t, err, dotlab.EROLECONFLICT)
		if _, err := sqlstoretest.Protocol(w.db).JoinLab(ctx, helper.ID, id, "collaborator"); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlstoretest.Protocol(w.db).JoinLab(ctx, helper.ID, id, "collaborator"); err != nil {
			t.Fatalf("joining twice: %v", err)
		}
		_, err = sqlstoretest.Protocol(w.db).PostLabMessage(ctx, stranger.ID, id, dotlab.LabMessageBody{Type: "note", To: "all", Body: "hi"})
		wantCode(t, err, dotlab.ENOTMEMBER)
		_, err = sqlstoretest.Protocol(w.db).PostLabMessage(ctx, helper.ID, id, dotlab.LabMessageBody{Type: "rant", To: "everyone", Body: ""})
		if wantCode(t, err, dotlab.EINVALID); len(dotlab.ErrorDetail(err)) != 3 {
			t.Fatalf("want type, to and body problems: %q", dotlab.ErrorDetail(err))
		}
		sqlstoretest.Protocol(w.db).JoinLab(ctx, runner.ID, id, "runner")
		var wg sync.WaitGroup
		const posts = 60
		for i := 0; i < posts; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				a := runner
				if i%2 == 0 {
					a = helper
				}
				if _, err := sqlstoretest.Protocol(w.db).PostLabMessage(ctx, a.ID, id, dotlab.LabMessageBody{Type: "finding", To: "all", Body: fmt.Sprintf("m%d", i), Refs: []string{"logs.jsonl:3"}}); err != nil {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		msgs, err := w.db.LabMessages(ctx, id, 0, 100)
		if err != nil || len(msgs) != posts {
			t.Fatalf("messages: %d %v", len(msgs), err)
		}
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Fatalf("seq %d at %d", m.Seq, i)
			}
		}
		seq, err := w.db.LabMessageSeq(ctx, id, msgs[6].ID)
		if err != nil || seq != 7 {
			t.Fatal(seq, err)
		}
		rest, _ := w.db.LabMessages(ctx, id, seq, 100)
		if len(rest) != posts-7 || rest[0].Seq != 8 {
			t.Fatalf("after 7: %d", len(rest))
		}
		members, _ := w.db.LabMembers(ctx, id)
		if len(members) != 3 { // runner, helper, submitter
			t.Fatalf("members: %+v", members)
		}
		// A collaborator cannot challenge.
		sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
		_, err = sqlstoretest.Protocol(w.db).CreateChallenge(ctx, helper, &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: id, Agrees: agree(true)}, nil)
		wantCode(t, err, dotlab.EROLECONFLICT)
	})
}
