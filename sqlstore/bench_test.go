package sqlstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/bench/benchdata"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// BenchmarkNextJob measures one draw (NextJob for an agent holding no role
// and no open offer) among 1,000 and 100,000 funded claims, on SQLite and,
// when reachable, PostgreSQL. The draw must walk an index, not the table:
// the target is claims=100000 within 1.5x of claims=1000, reported
// as the x_of_1k metric. With DOTLAB_BENCH_MILLION=1 it also draws among
// 1,000,000 (issue 25: same goal; the load takes minutes, so it is opt-in).
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
//	DOTLAB_BENCH_MILLION=1 go test -run '^$' -bench BenchmarkNextJob -timeout 60m ./sqlstore
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
	if os.Getenv("DOTLAB_BENCH_MILLION") == "1" {
		cases = append(cases, struct {
			name    string
			n       int
			analyze bool
		}{"claims=1000000", 1000000, false})
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
						j, found, err := sqlstoretest.Protocol(db).NextJob(ctx, runner)
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
	db, raw, sub := benchStore(b, engine)
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

// BenchmarkClaimSummary measures the front page's summary (counts by state
// and the 10 latest settled claims) among 10,000 claims, half of them
// settled, on SQLite and, when reachable, PostgreSQL. Target: well under
// 20 ms per call on SQLite.
//
//	go test -run '^$' -bench 'BenchmarkClaimSummary|BenchmarkAgentActivity' ./sqlstore
func BenchmarkClaimSummary(b *testing.B) {
	for _, engine := range sqlstoretest.Engines {
		b.Run("engine="+string(engine)+"/claims=10000", func(b *testing.B) {
			ctx := context.Background()
			db, _ := publicStore(b, engine, 10000)
			for b.Loop() {
				s, err := db.ClaimSummary(ctx, 10)
				if err != nil || s.Total != 10000 || len(s.RecentlySettled) != 10 {
					b.Fatalf("summary: %+v %v", s, err)
				}
			}
		})
	}
}

// BenchmarkAgentActivity measures an agent's latest 50 activity entries when
// the agent was offered every one of 10,000 claims (half declined, half
// accepted and published: 20,000 entries in all), the worst case of the
// store a busy runner would see.
func BenchmarkAgentActivity(b *testing.B) {
	for _, engine := range sqlstoretest.Engines {
		b.Run("engine="+string(engine)+"/claims=10000", func(b *testing.B) {
			ctx := context.Background()
			db, runner := publicStore(b, engine, 10000)
			for b.Loop() {
				a, err := db.AgentActivity(ctx, runner, 50)
				if err != nil || len(a) != 50 {
					b.Fatalf("activity: %d %v", len(a), err)
				}
			}
		})
	}
}

// publicStore opens a fresh store of the engine holding n claims, all
// offered to one runner: the odd-numbered declined, the even-numbered
// accepted, run (reproduced) and settled, one second apart. It returns the
// store and the runner's id.
func publicStore(b *testing.B, engine sqlstore.Dialect, n int) (*sqlstore.DB, string) {
	b.Helper()
	ctx := context.Background()
	db, raw, sub := benchStore(b, engine)
	runner, _, err := benchdata.Agent(ctx, db, "runner")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := benchdata.LoadClaims(ctx, raw, sub.ID, n, "public"); err != nil {
		b.Fatal(err)
	}
	const t0 = int64(1767225600000) // 2026-01-01
	for _, q := range []string{
		`INSERT INTO jobs (id, claim_id, agent_id, state, offered_at, offer_expires_at, accepted_at, publish_deadline, closed_at, reason)
			SELECT 'job_' || id, id, CAST($1 AS TEXT), CASE WHEN number % 2 = 0 THEN 'published' ELSE 'declined' END,
				$2 + number * 1000, $2 + number * 1000 + 60000,
				CASE WHEN number % 2 = 0 THEN $2 + number * 1000 + 100 END,
				CASE WHEN number % 2 = 0 THEN $2 + number * 1000 + 3600000 END,
				$2 + number * 1000 + 500,
				CASE WHEN number % 2 = 0 THEN '' ELSE 'no time' END
			FROM claims`,
		`INSERT INTO runs (id, claim_id, runner_id, outcome, body, comparisons, published_at)
			SELECT 'run_' || id, id, CAST($1 AS TEXT), 'reproduced', '{}', '[]', $2 + number * 1000 + 500 FROM claims WHERE number % 2 = 0`,
		`UPDATE claims SET state = 'settled', runner_id = CAST($1 AS TEXT), run_id = 'run_' || id, outcome = 'reproduced',
			settled_at = $2 + number * 1000 + 900 WHERE number % 2 = 0`,
	} {
		if _, err := raw.ExecContext(ctx, q, runner.ID, t0); err != nil {
			b.Fatal(err)
		}
	}
	if raw.Dialect == sqlstore.SQLite {
		if _, err := raw.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
	}
	return db, runner.ID
}

// benchStore opens a fresh store of the engine, a raw connection to the same
// database for bulk loading, and a registered submitter.
func benchStore(b *testing.B, engine sqlstore.Dialect) (*sqlstore.DB, *benchdata.Raw, *dotlab.Agent) {
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
	return db, raw, sub
}
