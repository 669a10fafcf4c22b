package sqlstore_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// The store's contract (package store) on both engines: a conditional
// write applies only while its condition holds, reports whether it
// applied, and writes nothing — no row, no log entry — when it did not.

// acceptedClaim lists a claim and has runner accept it through the
// protocol, and returns the claim.
func acceptedClaim(t *testing.T, db *sqlstore.DB, runner *dotlab.Agent, title string) *dotlab.Claim {
	t.Helper()
	ctx := context.Background()
	svc := sqlstoretest.Protocol(db)
	c, err := svc.CreateClaim(ctx, mustAgent(t, db, "submitter of "+title).ID, sqlstoretest.NewClaim(t, title))
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := sqlstoretest.Protocol(db).NextJob(ctx, runner); err != nil || !found {
		t.Fatalf("draw: %v %v", found, err)
	}
	if _, err := svc.AcceptJob(ctx, runner.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	c, err = db.FindClaim(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runWrite is a publication of claim c by runnerID at, as the protocol
// would write it, with one log entry.
func runWrite(t *testing.T, db *sqlstore.DB, c *dotlab.Claim, runnerID string, at time.Time) store.RunWrite {
	t.Helper()
	body := sqlstoretest.RunBody(c.ID, "1.58", "1.17", dotlab.OutcomeReproduced)
	tr, err := c.Next(dotlab.EventPublish)
	if err != nil {
		t.Fatal(err)
	}
	comps, err := dotlab.EvaluateRun(c.Manifest, body)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(body)
	compJSON, _ := json.Marshal(comps)
	run := &dotlab.Run{ID: dotlab.NewID("run_"), ClaimID: c.ID, RunnerID: runnerID, Outcome: body.Outcome, Body: *body, Comparisons: comps, PublishedAt: at}
	return store.RunWrite{Write: store.Write{At: at, Log: []tlogfmt.Entry{tlogfmt.RunEntry(run)}}, ClaimID: c.ID, RunnerID: runnerID,
		RunID: run.ID, Transition: tr, Outcome: body.Outcome, Body: raw, Comparisons: compJSON, ChallengeDeadline: at.Add(time.Hour),
		History: []string{"run " + run.ID + " published", "challenge window open"}}
}

func TestConditionalWritesReportWhetherTheyApplied(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock) {
		ctx := context.Background()
		runner, stranger := mustAgent(t, db, "runner"), mustAgent(t, db, "stranger")
		c := acceptedClaim(t, db, runner, "conditional writes")
		size := func() int64 { return settledLogSize(t, db) }
		before := size()

		// Not the runner: the condition (runner_id) fails; nothing written.
		if applied, err := db.AddRun(ctx, runWrite(t, db, c, stranger.ID, clock.Now())); err != nil || applied {
			t.Fatalf("a stranger's run: applied %v, %v", applied, err)
		}
		// Past the publish deadline: the condition fails.
		if applied, err := db.AddRun(ctx, runWrite(t, db, c, runner.ID, c.PublishDeadline.Add(time.Second))); err != nil || applied {
			t.Fatalf("a late run: applied %v, %v", applied, err)
		}
		if got := size(); got != before {
			t.Fatalf("writes that did not apply logged %d entries", got-before)
		}
		if after, _ := db.FindClaim(ctx, c.ID); after.State != dotlab.StateAssigned || after.RunID != "" {
			t.Fatalf("writes that did not apply moved the claim: %s run %q", after.State, after.RunID)
		}

		// The runner in time: applied, the claim moved, the entry logged;
		// the same write again finds the claim moved and does not apply.
		w := runWrite(t, db, c, runner.ID, clock.Now())
		if applied, err := db.AddRun(ctx, w); err != nil || !applied {
			t.Fatalf("the runner's run: applied %v, %v", applied, err)
		}
		if got := size(); got != before+1 {
			t.Fatalf("log grew by %d entries, want 1", got-before)
		}
		if applied, err := db.AddRun(ctx, runWrite(t, db, c, runner.ID, clock.Now())); err != nil || applied {
			t.Fatalf("a second run: applied %v, %v", applied, err)
		}
		if after, _ := db.FindClaim(ctx, c.ID); after.State != dotlab.StateChallengeWindow || after.RunID != w.RunID {
			t.Fatalf("after the run: %s run %q", after.State, after.RunID)
		}

		// A vote on a claim that is not disputed does not apply.
		v := dotlab.Vote{ClaimID: c.ID, ReviewerID: stranger.ID, Vote: dotlab.VoteRunner, Rationale: "mean_diff: 1.58 as published", CreatedAt: clock.Now()}
		if applied, err := db.AddVote(ctx, store.VoteWrite{Write: store.Write{At: v.CreatedAt, Log: []tlogfmt.Entry{tlogfmt.VoteEntry(&v)}}, Vote: v,
			Tally: func(dotlab.Tally, string, dotlab.Outcome, dotlab.Outcome) *store.Settlement { return nil }}); err != nil || applied {
			t.Fatalf("a vote outside a dispute: applied %v, %v", applied, err)
		}
		if got := size(); got != before+1 {
			t.Fatalf("the vote that did not apply logged an entry")
		}
	})
}

// TestSignedStatementUsedOnce: a run write carrying a signed statement
// records its use with the run; a second write bound to the same statement
// and key — another claim's run, as a race past the protocol's early check
// would bring — is refused with store.ErrStatementUsed and writes nothing
// (no run, no log entry, the claim unmoved), while the same statement
// signed with another key (two agents may sign one v1 statement) is
// another statement.
func TestSignedStatementUsedOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock) {
		ctx := context.Background()
		runner := mustAgent(t, db, "runner")
		x := acceptedClaim(t, db, runner, "statement once x")
		y := acceptedClaim(t, db, runner, "statement once y")
		sum := strings.Repeat("ab", 32)
		first := runWrite(t, db, x, runner.ID, clock.Now())
		first.Statement = store.SignedStatement{SHA256: sum, KeyID: "SHA256:k", SubjectType: tlogfmt.TypeRun, SubjectID: first.RunID}
		if applied, err := db.AddRun(ctx, first); err != nil || !applied {
			t.Fatalf("first use: applied %v, %v", applied, err)
		}
		if subject, found, err := db.StatementUse(ctx, sum, "SHA256:k"); err != nil || !found || subject != "run "+first.RunID {
			t.Fatalf("use of the statement: %q %v %v", subject, found, err)
		}
		if _, found, err := db.StatementUse(ctx, sum, "SHA256:other"); err != nil || found {
			t.Fatalf("the statement under another key: found %v, %v", found, err)
		}
		size := settledLogSize(t, db)
		again := runWrite(t, db, y, runner.ID, clock.Now())
		again.Statement = store.SignedStatement{SHA256: sum, KeyID: "SHA256:k", SubjectType: tlogfmt.TypeRun, SubjectID: again.RunID}
		if _, err := db.AddRun(ctx, again); err != store.ErrStatementUsed {
			t.Fatalf("second use: %v, want store.ErrStatementUsed", err)
		}
		if after := settledLogSize(t, db); after != size {
			t.Fatalf("the refused write logged %d entries", after-size)
		}
		if c, _ := db.FindClaim(ctx, y.ID); c.State != dotlab.StateAssigned || c.RunID != "" {
			t.Fatalf("the refused write moved %s to %s", y.ID, c.State)
		}
		again.Statement.KeyID = "SHA256:other"
		if applied, err := db.AddRun(ctx, again); err != nil || !applied {
			t.Fatalf("the same statement by another key: applied %v, %v", applied, err)
		}
	})
}

// settledLogSize is the log's size once every entry committed so far is
// integrated: writes answer at their commit and the batch follows
// (translog.Log.Await).
func settledLogSize(t *testing.T, db *sqlstore.DB) int64 {
	t.Helper()
	ctx := context.Background()
	if err := db.Log().Await(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := db.Log().Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenPostgresMissingSchema: a --db URL whose search_path names no
// existing schema is refused at Open with what to do, not a driver's scan
// error.
func TestOpenPostgresMissingSchema(t *testing.T) {
	base := sqlstoretest.URL(t, sqlstore.Postgres) // skips outside CI without PostgreSQL
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "no_such_schema_"+strings.ReplaceAll(t.Name(), "/", "_"))
	u.RawQuery = q.Encode()
	_, err = sqlstore.Open(context.Background(), u.String(), sqlstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "CREATE SCHEMA") {
		t.Fatalf("Open with a missing schema: %v, want the CREATE SCHEMA advice", err)
	}
}
