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

// TestAdvTwoSequencersAtOnce (adversarial review): two logs on two
// connection pools to one database (two server processes), each with its
// running sequencer (short tick), take concurrent appends from 8 writers
// at once; every entry ends with one index, every inclusion proof
// verifies against the final checkpoint, and the checkpoint each log
// last signed is consistent with it.
func TestAdvTwoSequencersAtOnce(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			u := sqlstoretest.URL(t, engine)
			da, db := reopenDB(t, engine, u), reopenDB(t, engine, u)
			a := da.open(t, translog.Options{Tick: 5 * time.Millisecond, MaxBatch: 7})
			b := db.open(t, translog.Options{Tick: 5 * time.Millisecond, MaxBatch: 7})
			const writers, each = 8, 30
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, l := da, a
					if w%2 == 1 {
						d, l = db, b
					}
					for i := 0; i < each; i++ {
						tx, err := d.w.BeginTx(ctx, nil)
						if err != nil {
							t.Error(err)
							return
						}
						if err := l.Append(ctx, tx, testEntry(w*each+i)); err != nil {
							tx.Rollback()
							t.Error(err)
							return
						}
						if err := tx.Commit(); err != nil {
							t.Error(err)
							return
						}
						if i%5 == 0 {
							actx, cancel := context.WithTimeout(ctx, 20*time.Second)
							if err := l.Await(actx); err != nil {
								t.Errorf("await: %v", err)
							}
							cancel()
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				pa, _ := a.Pending(ctx)
				pb, _ := b.Pending(ctx)
				if pa == 0 && pb == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still pending after 20 s: %d %d", pa, pb)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cp := checkpoint(t, a)
			if cp.Size != writers*each {
				t.Fatalf("size %d, want %d", cp.Size, writers*each)
			}
			seen := map[int64]bool{}
			for i := range writers * each {
				e, err := b.Lookup(ctx, tlogfmt.TypeMessage, testEntry(i).ID)
				if err != nil || seen[e.Index] {
					t.Fatalf("entry %d: %+v %v (index seen: %v)", i, e, err, seen[e.Index])
				}
				seen[e.Index] = true
				p, err := a.InclusionProof(ctx, e.Index, cp.Size)
				if err != nil {
					t.Fatal(err)
				}
				if err := tlog.CheckRecord(p, cp.Size, cp.Root, e.Index, tlog.RecordHash(e.Data)); err != nil {
					t.Fatalf("entry %d at %d: %v", i, e.Index, err)
				}
			}
			cpb := checkpoint(t, b)
			if cpb.Size != cp.Size || cpb.Root != cp.Root {
				t.Fatalf("the two logs disagree: %d %x / %d %x", cp.Size, cp.Root, cpb.Size, cpb.Root)
			}
		})
	}
}
