package translog_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"golang.org/x/mod/sumdb/tlog"
)

// pendN appends n test entries numbered from first, per to a transaction,
// and leaves them pending (no Await).
func pendN(t testing.TB, d testDB, l *translog.Log, first, n, per int) {
	t.Helper()
	ctx := context.Background()
	for i := first; i < first+n; i += per {
		tx, err := d.w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := i; j < min(i+per, first+n); j++ {
			if err := l.Append(ctx, tx, testEntry(j)); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPendingThenIntegrated: an appended entry is pending (no index, not
// in the tree, the checkpoint unchanged) until a batch integrates it;
// batches of at most MaxBatch integrate a backlog in order, every proof
// verifies against the stored checkpoint, and the trees stay consistent.
func TestPendingThenIntegrated(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{Origin: "test.dotlab/log", Manual: true, MaxBatch: 7})
			pendN(t, d, l, 0, 5, 5)
			if e, err := l.Lookup(ctx, tlogfmt.TypeMessage, testEntry(2).ID); err != nil || !e.Pending || e.Index != -1 || len(e.Data) == 0 {
				t.Fatalf("pending lookup: %+v %v", e, err)
			}
			if size, _ := l.Size(ctx); size != 0 {
				t.Fatalf("size %d before integration", size)
			}
			if n, err := l.Sync(ctx); err != nil || n != 5 {
				t.Fatalf("sync: %d %v", n, err)
			}
			old := checkpoint(t, l)
			pendN(t, d, l, 5, 40, 3)
			if p, _ := l.Pending(ctx); p != 40 {
				t.Fatalf("pending %d, want 40", p)
			}
			if n, err := l.Sync(ctx); err != nil || n != 40 {
				t.Fatalf("sync: %d %v", n, err)
			}
			st := l.Stats()
			if st.Batches != 7 || st.MaxBatch != 7 || st.Entries != 45 {
				t.Fatalf("stats %+v: want 7 batches of at most 7, 45 entries", st)
			}
			cp := checkpoint(t, l)
			if cp.Size != 45 {
				t.Fatalf("size %d", cp.Size)
			}
			for i := int64(0); i < cp.Size; i++ {
				e, err := l.Lookup(ctx, tlogfmt.TypeMessage, testEntry(int(i)).ID)
				if err != nil || e.Index != i || e.Pending {
					t.Fatalf("entry %d: %+v %v (ids are integrated in append order)", i, e, err)
				}
				p, err := l.InclusionProof(ctx, i, cp.Size)
				if err != nil {
					t.Fatal(err)
				}
				if err := tlog.CheckRecord(p, cp.Size, cp.Root, i, tlog.RecordHash(e.Data)); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
			p, err := l.ConsistencyProof(ctx, old.Size, cp.Size)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckTree(p, cp.Size, cp.Root, old.Size, old.Root); err != nil {
				t.Fatal(err)
			}
			// A checkpoint the sequencer stored is what a fresh process serves.
			again := d.open(t, translog.Options{Manual: true})
			if _, signed, err := again.Checkpoint(ctx); err != nil || string(signed) != string(checkpointNote(t, l)) {
				t.Fatalf("stored checkpoint: %q %v", signed, err)
			}
		})
	}
}

func checkpointNote(t *testing.T, l *translog.Log) []byte {
	_, signed, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// TestDuplicatePendingDropped: a pending entry whose record is already
// in the log (possible only in the instant a batch moves the first one)
// is dropped by the next batch instead of failing it and stopping the log.
func TestDuplicatePendingDropped(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{Manual: true})
			pendN(t, d, l, 0, 3, 3)
			if _, err := l.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			e := testEntry(1)
			body, _ := e.Encode()
			if _, err := d.w.Exec(`INSERT INTO log_pending (type, claim_id, record_id, body) VALUES ($1, $2, $3, $4)`, string(e.Type), e.ClaimID, e.ID, body); err != nil {
				t.Fatal(err)
			}
			pendN(t, d, l, 3, 2, 1)
			if n, err := l.Sync(ctx); err != nil || n != 2 {
				t.Fatalf("sync: %d %v; want the 2 new entries", n, err)
			}
			if size, _ := l.Size(ctx); size != 5 {
				t.Fatalf("size %d, want 5", size)
			}
			if p, _ := l.Pending(ctx); p != 0 {
				t.Fatalf("%d left pending", p)
			}
		})
	}
}

// TestAwaitWithSequencer: with the sequencer goroutine (the default), an
// entry committed before Await is integrated when Await returns, and an
// entry left pending by another process (here: written by SQL) is
// integrated by the tick.
func TestAwaitWithSequencer(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{})
			pendN(t, d, l, 0, 10, 2)
			if err := l.Await(ctx); err != nil {
				t.Fatal(err)
			}
			if size, _ := l.Size(ctx); size != 10 {
				t.Fatalf("size %d after Await, want 10", size)
			}
			e := testEntry(10)
			body, _ := e.Encode()
			if _, err := d.w.Exec(`INSERT INTO log_pending (type, claim_id, record_id, body) VALUES ($1, $2, $3, $4)`, string(e.Type), e.ClaimID, e.ID, body); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(2 * time.Second)
			for size, _ := l.Size(ctx); size != 11; size, _ = l.Size(ctx) {
				if time.Now().After(deadline) {
					t.Fatalf("size %d: the tick did not integrate the stray entry within 2 s", size)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestTwoSequencers: two logs on one database (two processes) integrate
// in turn; each batch builds on the other's tree (a process's kept right
// edge is used only when nobody else wrote since), and every entry's
// proof verifies.
func TestTwoSequencers(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			a := d.open(t, translog.Options{Manual: true})
			b := d.open(t, translog.Options{Manual: true})
			for i, l := range []*translog.Log{a, a, b, a, b, b, a} {
				pendN(t, d, l, i*11, 11, 4)
				if n, err := l.Sync(ctx); err != nil || n != 11 {
					t.Fatalf("round %d: %d %v", i, n, err)
				}
			}
			cp := checkpoint(t, b)
			for i := int64(0); i < cp.Size; i++ {
				e, err := a.Lookup(ctx, tlogfmt.TypeMessage, testEntry(int(i)).ID)
				if err != nil || e.Index != i {
					t.Fatalf("entry %d: %+v %v", i, e, err)
				}
				p, err := a.InclusionProof(ctx, i, cp.Size)
				if err != nil {
					t.Fatal(err)
				}
				if err := tlog.CheckRecord(p, cp.Size, cp.Root, i, tlog.RecordHash(e.Data)); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
		})
	}
}

// TestCommittedIntegratesWithinASecond: writers that only wake the
// sequencer after their commits (Committed, what a write does before it
// answers) find every entry integrated within a second of its commit, and
// the sequencer's lag figures say so; nothing is waited for by the
// writers themselves.
func TestCommittedIntegratesWithinASecond(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{})
			const writers, each = 8, 25
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						tx, err := d.w.BeginTx(ctx, nil)
						if err == nil {
							err = l.Append(ctx, tx, testEntry(w*each+i))
						}
						if err == nil {
							err = tx.Commit()
						} else if tx != nil {
							tx.Rollback()
						}
						if err != nil {
							errs <- err
							return
						}
						l.Committed()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			last := time.Now()
			for size, _ := l.Size(ctx); size != writers*each; size, _ = l.Size(ctx) {
				if time.Since(last) > time.Second {
					t.Fatalf("size %d of %d a second after the last commit", size, writers*each)
				}
				time.Sleep(5 * time.Millisecond)
			}
			s := l.Stats()
			if s.Drains == 0 || s.MaxLag <= 0 || s.MaxLag > time.Second || s.LagOver1s != 0 {
				t.Fatalf("lag figures: %d drains, max %s, %d over 1 s", s.Drains, s.MaxLag, s.LagOver1s)
			}
			if n, _ := l.Pending(ctx); n != 0 {
				t.Fatalf("%d still pending", n)
			}
		})
	}
}
