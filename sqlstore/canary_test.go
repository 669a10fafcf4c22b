package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestCanaryReports (migration 00012): each agent's report on a URL
// replaces its earlier one; the latest report per URL, over agents, is
// what the claim shows; LastCanaryReport is the agent's latest time. Both
// engines.
func TestCanaryReports(t *testing.T) {
	forEachEngine(t, func(t *testing.T, db *sqlstore.DB, clock *sqlstoretest.Clock) {
		ctx := context.Background()
		w := &world{t: t, db: db, clock: clock, sub: mustAgent(t, db, "submitter")}
		a, b := mustAgent(t, db, "canary-a"), mustAgent(t, db, "canary-b")
		id := w.assigned("canary", mustAgent(t, db, "runner"))
		if _, found, err := db.LastCanaryReport(ctx, id, a.ID); err != nil || found {
			t.Fatalf("before any report: %v %v", found, err)
		}
		u1, u2 := "https://data.example.org/sleep.csv", "https://code.example.org/a.tgz"
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(db.AddCanaryReports(ctx, id, a.ID, t0, []dotlab.CanaryReport{{URL: u1, Status: dotlab.CanaryServing}, {URL: u2, Status: dotlab.CanaryServing}}))
		must(db.AddCanaryReports(ctx, id, b.ID, t0.Add(time.Hour), []dotlab.CanaryReport{{URL: u1, Status: dotlab.CanaryDead, Detail: "HTTP 404"}}))
		must(db.AddCanaryReports(ctx, id, a.ID, t0.Add(2*time.Hour), []dotlab.CanaryReport{{URL: u2, Status: dotlab.CanaryDifferent, Detail: "sha256 00"}}))
		got, err := db.LatestCanaryReports(ctx, id)
		must(err)
		if len(got) != 2 || got[0].URL != u2 || got[0].Status != dotlab.CanaryDifferent || got[0].AgentID != a.ID ||
			got[1].URL != u1 || got[1].Status != dotlab.CanaryDead || got[1].AgentID != b.ID || got[1].Detail != "HTTP 404" || !got[1].ReportedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("latest: %+v", got)
		}
		at, found, err := db.LastCanaryReport(ctx, id, a.ID)
		if err != nil || !found || !at.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("last of a: %v %v %v", at, found, err)
		}
	})
}
