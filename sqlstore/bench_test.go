package sqlstore_test

import (
	"context"
	"testing"

	"github.com/dotlab/dotlab/bench/benchdata"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/sqlstore/sqlstoretest"
)

// BenchmarkNextJob measures one draw (NextJob for an agent holding no role
// and no open offer) among 1,000 and 100,000 funded claims, on SQLite and,
// when reachable, PostgreSQL. The draw must walk an index, not the table:
// the target is claims=100000 within 1.5x of claims=1000, reported
// as the x_of_1k metric.
//
// The store is used as a server would find it: claims bulk-loaded, no
// ANALYZE (sqlstore never runs one). The sub-benchmark
// claims=100000,analyzed runs ANALYZE after loading, to show what the draw
// costs once the planner has statistics.
//
// Between draws, with the timer stopped, the offer is undone through a
// second connection (the claim's runner and offer expiry cleared, the job
// row deleted), so every draw sees the same pool.
//
//	go test -run '^$' -bench BenchmarkNextJob ./sqlstore
func BenchmarkNextJob(b *testing.B) {
	cases := []struct {
		name    string
		n       int
		analyze bool
	}{
		{"claims=1000", 1000, false},
		{"claims=100000", 100000, false},
		{"claims=100000,analyzed", 100000, true},
	}
	for _, engine := range sqlstoretest.Engines {
		b.Run("engine="+string(engine), func(b *testing.B) {
			var base float64 // ns per draw at 1,000 claims
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					ctx := context.Background()
					db, reset := drawStore(b, engine, c.n, c.analyze)
					runner, _, err := benchdata.Agent(ctx, db, "runner")
					if err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						j, found, err := db.NextJob(ctx, runner)
						if err != nil || !found {
							b.Fatalf("draw: found %v, %v", found, err)
						}
						b.StopTimer()
						reset(j.ClaimID, runner.ID)
						b.StartTimer()
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					if c.n == 1000 {
						base = ns
					} else if base > 0 {
						b.ReportMetric(ns/base, "x_of_1k")
					}
				})
			}
		})
	}
}

// drawStore opens a fresh store of the engine holding n funded claims and
// returns it with a function that undoes one offer.
func drawStore(b *testing.B, engine sqlstore.Dialect, n int, analyze bool) (*sqlstore.DB, func(claimID, agentID string)) {
	b.Helper()
	ctx := context.Background()
	u := sqlstoretest.URL(b, engine)
	db, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	raw, err := benchdata.OpenRaw(u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	sub, _, err := benchdata.Agent(ctx, db, "submitter")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := benchdata.LoadClaims(ctx, raw, sub.ID, n, "draw"); err != nil {
		b.Fatal(err)
	}
	if analyze {
		if err := benchdata.Analyze(ctx, raw); err != nil {
			b.Fatal(err)
		}
	}
	return db, func(claimID, agentID string) {
		if _, err := raw.ExecContext(ctx, `UPDATE claims SET runner_id = NULL, offer_expires_at = NULL WHERE id = $1`, claimID); err != nil {
			b.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, `DELETE FROM jobs WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID); err != nil {
			b.Fatal(err)
		}
	}
}
