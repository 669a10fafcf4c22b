package sqlstore_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// forEachEngine runs fn as a subtest on SQLite and on PostgreSQL with a
// fresh database and a settable clock.
func forEachEngine(t *testing.T, fn func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock)) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			clock := sqlstoretest.NewClock()
			db := sqlstoretest.Open(t, e, sqlstore.Options{Clock: clock})
			fn(t, db, clock)
		})
	}
}

func mustAgent(t *testing.T, db *sqlstore.DB, name string, caps ...string) *dotlab.Agent {
	t.Helper()
	a, key, err := sqlstoretest.Protocol(db).CreateAgent(context.Background(), dotlab.NewAgent{Name: name, Operator: "test operator", Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	if len(key) < 40 {
		t.Fatalf("key %q too short", key)
	}
	return a
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := dotlab.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func TestAgents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, _ *sqlstoretest.Clock) {
		ctx := context.Background()
		a, key, err := sqlstoretest.Protocol(db).CreateAgent(ctx, dotlab.NewAgent{Name: "ada", Operator: "lab", Capabilities: []string{"python", "r"}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.AuthenticateAgent(ctx, key)
		if err != nil || got.ID != a.ID || len(got.Capabilities) != 2 {
			t.Fatalf("authenticate: %+v %v", got, err)
		}
		_, err = db.AuthenticateAgent(ctx, key+"x")
		wantCode(t, err, dotlab.EUNAUTHORIZED)
		p, err := db.FindAgent(ctx, a.ID)
		if err != nil || p.Name != "ada" || p.Standing != 0 {
			t.Fatalf("profile: %+v %v", p, err)
		}
		_, err = db.FindAgent(ctx, "ag_nope")
		wantCode(t, err, dotlab.ENOTFOUND)
		_, _, err = sqlstoretest.Protocol(db).CreateAgent(ctx, dotlab.NewAgent{Name: "", Operator: "x", Capabilities: []string{"Python"}})
		wantCode(t, err, dotlab.EINVALID)
		if d := dotlab.ErrorDetail(err); len(d) != 2 {
			t.Fatalf("want name and capability problems, got %q", d)
		}
	})
}

func TestClaimsListingAndDuplicates(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, _ *sqlstoretest.Clock) {
		ctx := context.Background()
		sub := mustAgent(t, db, "submitter")
		for i := 1; i <= 5; i++ {
			c, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, fmt.Sprintf("claim %d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("DL-%04d", i); c.ID != want || c.State != dotlab.StateFunded {
				t.Fatalf("claim %d: id %s state %s", i, c.ID, c.State)
			}
		}
		_, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "claim 3"))
		wantCode(t, err, dotlab.EDUPLICATE)
		page, err := db.FindClaims(ctx, dotlab.Page{Limit: 2, After: "DL-0002"})
		if err != nil || len(page) != 2 || page[0].ID != "DL-0003" {
			t.Fatalf("page: %v %v", page, err)
		}
		page, _ = db.FindClaims(ctx, dotlab.Page{State: dotlab.StateSettled})
		if len(page) != 0 {
			t.Fatalf("settled: %d", len(page))
		}
		raw, err := db.ClaimManifest(ctx, "DL-0001")
		if err != nil || string(raw) != string(sqlstoretest.ManifestJSON("claim 1")) {
			t.Fatalf("manifest not byte-identical: %v", err)
		}
		ev, err := db.ClaimEvents(ctx, "DL-0001", 0)
		if err != nil || len(ev) != 2 || ev[0].State != dotlab.StateListed || ev[1].State != dotlab.StateFunded {
			t.Fatalf("events: %+v %v", ev, err)
		}
		_, err = db.FindClaim(ctx, "DL-9999")
		wantCode(t, err, dotlab.ENOTFOUND)
	})
}

func TestDrawRules(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock) {
		ctx := context.Background()
		sub := mustAgent(t, db, "submitter", "python")
		runner := mustAgent(t, db, "runner", "python")
		noPython := mustAgent(t, db, "bare")
		if _, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "needs python", "python")); err != nil {
			t.Fatal(err)
		}
		// The submitter is never offered its own claim.
		if _, found, err := sqlstoretest.Protocol(db).NextJob(ctx, sub); err != nil || found {
			t.Fatalf("submitter offered own claim: %v %v", found, err)
		}
		// Requirements not met: no offer.
		if _, found, _ := sqlstoretest.Protocol(db).NextJob(ctx, noPython); found {
			t.Fatal("agent without python offered a python claim")
		}
		j, found, err := sqlstoretest.Protocol(db).NextJob(ctx, runner)
		if err != nil || !found || j.ClaimID != "DL-0001" || j.State != dotlab.JobOffered {
			t.Fatalf("offer: %+v %v %v", j, found, err)
		}
		// Asking again returns the same open offer.
		j2, _, _ := sqlstoretest.Protocol(db).NextJob(ctx, runner)
		if j2.ClaimID != j.ClaimID || !j2.OfferedAt.Equal(j.OfferedAt) {
			t.Fatalf("second draw gave %+v", j2)
		}
		// Only the offered agent can accept; an expired offer cannot be accepted.
		_, err = sqlstoretest.Protocol(db).AcceptJob(ctx, noPython.ID, "DL-0001")
		wantCode(t, err, dotlab.ENOTOFFERED)
		clock.Advance(61 * time.Minute)
		_, err = sqlstoretest.Protocol(db).AcceptJob(ctx, runner.ID, "DL-0001")
		wantCode(t, err, dotlab.EWINDOWCLOSED)
	})
}

func TestAcceptDeclineAndPublish(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock) {
		ctx := context.Background()
		sub := mustAgent(t, db, "submitter")
		r1 := mustAgent(t, db, "r1")
		r2 := mustAgent(t, db, "r2")
		if _, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "claim")); err != nil {
			t.Fatal(err)
		}
		j, _, _ := sqlstoretest.Protocol(db).NextJob(ctx, r1)
		_, err := sqlstoretest.Protocol(db).DeclineJob(ctx, r1.ID, j.ClaimID, strings.Repeat("x", dotlab.MaxDeclineReason+1))
		wantCode(t, err, dotlab.EINVALID)
		if _, err := sqlstoretest.Protocol(db).DeclineJob(ctx, r1.ID, j.ClaimID, "capability_mismatch"); err != nil {
			t.Fatal(err)
		}
		// A declined claim is not offered to the same agent again, but to others.
		if _, found, _ := sqlstoretest.Protocol(db).NextJob(ctx, r1); found {
			t.Fatal("declined claim offered again to the same agent")
		}
		j, found, _ := sqlstoretest.Protocol(db).NextJob(ctx, r2)
		if !found {
			t.Fatal("declined claim not back in the pool")
		}
		acc, err := sqlstoretest.Protocol(db).AcceptJob(ctx, r2.ID, j.ClaimID)
		if err != nil || acc.State != dotlab.JobAccepted || acc.PublishDeadline == nil {
			t.Fatalf("accept: %+v %v", acc, err)
		}
		c, _ := db.FindClaim(ctx, j.ClaimID)
		if c.State != dotlab.StateAssigned || c.RunnerID != r2.ID {
			t.Fatalf("claim after accept: %s %s", c.State, c.RunnerID)
		}
		// Not the runner → not_offered; wrong outcome → outcome_mismatch.
		_, err = sqlstoretest.Protocol(db).PublishRun(ctx, r1, sqlstoretest.RunBody(j.ClaimID, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
		wantCode(t, err, dotlab.ENOTOFFERED)
		_, err = sqlstoretest.Protocol(db).PublishRun(ctx, r2, sqlstoretest.RunBody(j.ClaimID, "1.58", "1.23", dotlab.OutcomeReproduced), nil)
		wantCode(t, err, dotlab.EOUTCOMEMISMATCH)
		bad := sqlstoretest.RunBody(j.ClaimID, "1.58", "1.17", dotlab.OutcomeReproduced)
		bad.Environment.ImageDigest = "sha256:" + sqlstoretest.DataSHA256
		_, err = sqlstoretest.Protocol(db).PublishRun(ctx, r2, bad, nil)
		wantCode(t, err, dotlab.EINVALID)
		run, err := sqlstoretest.Protocol(db).PublishRun(ctx, r2, sqlstoretest.RunBody(j.ClaimID, "1.58", "1.2299", dotlab.OutcomeNotReproduced), nil)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != dotlab.StateChallengeWindow || run.Comparisons[1].Match || run.ChallengeDeadline == nil {
			t.Fatalf("run: %+v", run)
		}
		_, err = sqlstoretest.Protocol(db).PublishRun(ctx, r2, sqlstoretest.RunBody(j.ClaimID, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
		wantCode(t, err, dotlab.ECONFLICT)
		runs, err := db.FindRuns(ctx, dotlab.Page{State: dotlab.StateChallengeWindow})
		if err != nil || len(runs) != 1 || runs[0].ID != run.ID {
			t.Fatalf("runs in window: %v %v", runs, err)
		}
		p, _ := db.FindAgent(ctx, r2.ID)
		if p.JobsCompleted != 1 || p.Outcomes[dotlab.OutcomeNotReproduced] != 1 {
			t.Fatalf("profile: %+v", p)
		}
		_ = clock
	})
}

func TestSpecIssueSettlesAtOnceAndDeadline(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock) {
		ctx := context.Background()
		sub := mustAgent(t, db, "submitter")
		r := mustAgent(t, db, "r")
		for _, title := range []string{"a", "b"} {
			if _, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, title)); err != nil {
				t.Fatal(err)
			}
		}
		j, _, _ := sqlstoretest.Protocol(db).NextJob(ctx, r)
		sqlstoretest.Protocol(db).AcceptJob(ctx, r.ID, j.ClaimID)
		body := sqlstoretest.RunBody(j.ClaimID, "0", "0", dotlab.OutcomeSpecIssue)
		_, err := sqlstoretest.Protocol(db).PublishRun(ctx, r, body, nil)
		wantCode(t, err, dotlab.EINVALID) // notes required
		body.Notes = "analysis.py exits 1: sleep.csv has no column 'extra'"
		run, err := sqlstoretest.Protocol(db).PublishRun(ctx, r, body, nil)
		if err != nil || run.Status != dotlab.StateSettled {
			t.Fatalf("spec_issue: %+v %v", run, err)
		}
		c, _ := db.FindClaim(ctx, j.ClaimID)
		if c.Outcome != dotlab.OutcomeSpecIssue || c.SettledAt == nil {
			t.Fatalf("claim: %+v", c)
		}
		// Publish deadline: 24 h after accepting.
		j, _, _ = sqlstoretest.Protocol(db).NextJob(ctx, r)
		sqlstoretest.Protocol(db).AcceptJob(ctx, r.ID, j.ClaimID)
		clock.Advance(24*time.Hour + time.Second)
		_, err = sqlstoretest.Protocol(db).PublishRun(ctx, r, sqlstoretest.RunBody(j.ClaimID, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
		wantCode(t, err, dotlab.EWINDOWCLOSED)
	})
}

// TestDrawRace: many agents draw at once; every claim is offered to exactly
// one agent, and with one claim exactly one agent gets it.
func TestDrawRace(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, _ *sqlstoretest.Clock) {
		ctx := context.Background()
		sub := mustAgent(t, db, "submitter")
		const agents, claims = 16, 5
		var as []*dotlab.Agent
		for i := 0; i < agents; i++ {
			as = append(as, mustAgent(t, db, fmt.Sprintf("a%d", i)))
		}
		for i := 0; i < claims; i++ {
			if _, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, fmt.Sprintf("c%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string][]string{}
		start := make(chan struct{})
		for _, a := range as {
			wg.Add(1)
			go func(a *dotlab.Agent) {
				defer wg.Done()
				<-start
				j, found, err := sqlstoretest.Protocol(db).NextJob(ctx, a)
				if err != nil {
					t.Error(err)
					return
				}
				if found {
					mu.Lock()
					got[j.ClaimID] = append(got[j.ClaimID], a.ID)
					mu.Unlock()
				}
			}(a)
		}
		close(start)
		wg.Wait()
		if len(got) != claims {
			t.Fatalf("%d of %d claims offered: %v", len(got), claims, got)
		}
		for id, winners := range got {
			if len(winners) != 1 {
				t.Fatalf("claim %s offered to %d agents: %v", id, len(winners), winners)
			}
		}
	})
}

// One agent drawing concurrently gets one offer, not one per call.
func TestOneOpenOfferPerAgent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, _ *sqlstoretest.Clock) {
		ctx := context.Background()
		sub := mustAgent(t, db, "submitter")
		a := mustAgent(t, db, "hoarder")
		for i := 0; i < 8; i++ {
			if _, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, fmt.Sprintf("c%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string]bool{}
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j, found, err := sqlstoretest.Protocol(db).NextJob(ctx, a)
				if err != nil || !found {
					t.Error(found, err)
					return
				}
				mu.Lock()
				got[j.ClaimID] = true
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(got) != 1 {
			t.Fatalf("one agent holds %d offers: %v", len(got), got)
		}
	})
}

// Extreme but valid numbers (the edges of the accepted range) are recorded
// and read back (no broken records).
func TestExtremeRerunValues(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, _ *sqlstoretest.Clock) {
		ctx := context.Background()
		sub, r := mustAgent(t, db, "submitter"), mustAgent(t, db, "r")
		sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "extreme"))
		j, _, _ := sqlstoretest.Protocol(db).NextJob(ctx, r)
		sqlstoretest.Protocol(db).AcceptJob(ctx, r.ID, j.ClaimID)
		run, err := sqlstoretest.Protocol(db).PublishRun(ctx, r, sqlstoretest.RunBody(j.ClaimID, "1.7976931348623157e308", "-1e-308", dotlab.OutcomeNotReproduced), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The difference is exact: 1.7976931348623157e308 - 1.58, all 312 characters of it.
		d, ok := new(big.Rat).SetString(string(run.Comparisons[0].Difference))
		want, _ := new(big.Rat).SetString("1.7976931348623157e308")
		want.Sub(want, big.NewRat(158, 100))
		if !ok || d.Cmp(want) != 0 {
			t.Fatalf("difference %.60s… is not exact", string(run.Comparisons[0].Difference))
		}
		if runs, err := db.FindRuns(ctx, dotlab.Page{}); err != nil || len(runs) != 1 {
			t.Fatalf("listing: %v %v", runs, err)
		}
	})
}
