package sqlstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dotlab/dotlab/bench/benchdata"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/sqlstore/sqlstoretest"
)

// BenchmarkNextJob measures one draw (NextJob for an agent holding no role
// and no open offer) among 1,000 and 100,000 funded claims, on SQLite and,
// when reachable, PostgreSQL. The draw must walk an index, not the table:
// the target is claims=100000 within 1.5x of claims=1000, and the
// ratio is logged per engine. Between draws, with the timer stopped, the
// offer is undone through a second connection (the claim's runner and offer
// expiry cleared, the job row deleted), so every draw sees the same pool.
//
//	go test -run '^$' -bench BenchmarkNextJob -benchtime 3s ./sqlstore
func BenchmarkNextJob(b *testing.B) {
	for _, engine := range sqlstoretest.Engines {
		b.Run("engine="+string(engine), func(b *testing.B) {
			nsPerOp := map[int]float64{}
			for _, n := range []int{1000, 100000} {
				b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
					ctx := context.Background()
					db, reset := drawStore(b, engine, n)
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
					nsPerOp[n] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					if n != 1000 && nsPerOp[1000] > 0 {
						b.ReportMetric(nsPerOp[n]/nsPerOp[1000], "x_of_1k")
					}
				})
			}
			if nsPerOp[1000] > 0 && nsPerOp[100000] > 0 {
				b.Logf("%s: NextJob at 100,000 claims / at 1,000 = %.0f / %.0f ns = %.2fx (target <= 1.5x)",
					engine, nsPerOp[100000], nsPerOp[1000], nsPerOp[100000]/nsPerOp[1000])
			}
		})
	}
}

// drawStore opens a fresh store of the engine holding n funded claims and
// returns it with a function that undoes one offer.
func drawStore(b *testing.B, engine sqlstore.Dialect, n int) (*sqlstore.DB, func(claimID, agentID string)) {
	b.Helper()
	ctx := context.Background()
	u := sqlstoretest.URL(b, engine)
	db, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	raw, _, err := benchdata.OpenRaw(u)
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
	return db, func(claimID, agentID string) {
		if _, err := raw.ExecContext(ctx, `UPDATE claims SET runner_id = NULL, offer_expires_at = NULL WHERE id = $1`, claimID); err != nil {
			b.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, `DELETE FROM jobs WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID); err != nil {
			b.Fatal(err)
		}
	}
}
