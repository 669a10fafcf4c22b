package translog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/translog"
)

// TestAdvHungSequencerStallsLog (adversarial review): on PostgreSQL the
// batch that holds log_head's row (FOR UPDATE) is the only sequencer;
// the others SKIP LOCKED and retry. A process that hangs holding it
// (SIGSTOP, a partitioned host: its session idle in transaction) is
// modelled by a connection that locks the row and sits. Nothing bounds
// the holder (no idle_in_transaction_session_timeout or lease), so every
// other process's entries stay pending for as long as it sits: writes
// answer after their 2 s wait with entries pending, and dotlab verify
// calls their records "not in the log" after 5 s. Fixed: every batch sets
// idle_in_transaction_session_timeout (translog.BatchIdleTimeout), so the
// hung session is ended and another process sequences; the test models
// the hung batch with the same setting and checks that the entries are
// integrated. TestBatchSetsIdleTimeout checks that batches set it.
func TestAdvHungSequencerStallsLog(t *testing.T) {
	ctx := context.Background()
	d := openDB(t, sqlstore.Postgres)
	l := d.open(t, translog.Options{Tick: 5 * time.Millisecond})
	hung, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Rollback()
	var size int64
	// As every batch does (translog.BatchIdleTimeout): PostgreSQL ends a
	// session that sits idle inside its batch, releasing the head.
	if _, err := hung.ExecContext(ctx, fmt.Sprintf(`SET LOCAL idle_in_transaction_session_timeout = %d`, translog.BatchIdleTimeout.Milliseconds())); err != nil {
		t.Fatal(err)
	}
	if err := hung.QueryRowContext(ctx, `SELECT size FROM log_head WHERE id = 1 FOR UPDATE`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	pendN(t, d, l, 0, 3, 1)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if n, err := l.Pending(ctx); err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("entries still pending 15 s after the sequencer hung holding the head")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
