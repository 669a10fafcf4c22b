package main

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/sqlstore"
)

// outboxPairs runs the API write row n more times with the outbox and n
// times with pg_notify inside each write transaction (PostgreSQL), in the
// order ABBA ABBA …, so that a load that rises or falls over the run
// weighs on both alike (-outbox-pairs). Each row has a fresh store.
func outboxPairs(ctx context.Context, c config, st *stores, leaks *leakcheck.Checker, n int) ([]row, error) {
	var rows []row
	var sum [2]float64
	for i := range 2 * n {
		for _, inTx := range [][]bool{{false, true}, {true, false}}[i%2] {
			name := fmt.Sprintf("writes_api_pair%d_outbox", i)
			label := fmt.Sprintf("pair %d: next+accept+runs, outbox", i+1)
			if inTx {
				name = fmt.Sprintf("writes_api_pair%d_in_tx", i)
				label = fmt.Sprintf("pair %d: next+accept+runs, pg_notify in each write tx", i+1)
			}
			w, err := apiWrites(ctx, c, st, leaks, name, sqlstore.Options{NotifyInTx: inTx}, "", 0)
			if err != nil {
				return nil, err
			}
			if inTx {
				sum[1] += w.rate()
			} else {
				sum[0] += w.rate()
			}
			rows = append(rows, row{name: label, r: w, unit: "cycles/s"})
		}
	}
	fmt.Printf("  pairs: outbox mean %.0f / pg_notify in each write tx mean %.0f cycles/s (%.2fx)\n",
		sum[0]/float64(2*n), sum[1]/float64(2*n), ratio(sum[0], sum[1]))
	return rows, nil
}
