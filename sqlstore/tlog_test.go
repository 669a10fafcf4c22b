package sqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/tlog"
)

// TestTwoProcessesAppendConcurrently: two stores (two pools, as two server
// processes) on one PostgreSQL list claims concurrently; the log holds one
// entry per claim, indexes 0…n-1 with no gap and no duplicate, and its root
// is the RFC 6962 root of those entries in index order.
func TestTwoProcessesAppendConcurrently(t *testing.T) {
	ctx := context.Background()
	u := sqlstoretest.URL(t, sqlstore.Postgres)
	var dbs []*sqlstore.DB
	for range 2 {
		db, err := sqlstore.Open(ctx, u, sqlstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	if dbs[0].Log().VerifierKey() != dbs[1].Log().VerifierKey() {
		t.Fatal("two processes made two log keys")
	}
	sub := mustAgent(t, dbs[0], "submitter")
	const workers, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for p, db := range dbs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					_, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, fmt.Sprintf("concurrent %d-%d-%d", p, w, i)))
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	const n = 2 * workers * each
	// Writes answer at their commit; each process's sequencer integrates
	// what it committed (Await), whichever process's batch takes it.
	for _, db := range dbs {
		if err := db.Log().Await(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l := dbs[1].Log()
	if size, err := l.Size(ctx); err != nil || size != n {
		t.Fatalf("log size %d (%v), want %d", size, err, n)
	}
	seen := map[string]bool{}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("DL-%04d", i)
		e, err := l.Lookup(ctx, tlogfmt.TypeClaim, id)
		if err != nil {
			t.Fatal(err)
		}
		if seen[fmt.Sprint(e.Index)] {
			t.Fatalf("index %d twice", e.Index)
		}
		seen[fmt.Sprint(e.Index)] = true
	}
	es, err := l.ClaimEntries(ctx, "DL-0001", n)
	if err != nil || len(es) != 1 {
		t.Fatalf("claim entries %d %v", len(es), err)
	}
	for i := range int64(n) {
		if !seen[fmt.Sprint(i)] {
			t.Fatalf("gap at index %d", i)
		}
	}
	// Recompute the root from the entries in index order.
	all := map[int64][]byte{}
	for i := 1; i <= n; i++ {
		e, _ := l.Lookup(ctx, tlogfmt.TypeClaim, fmt.Sprintf("DL-%04d", i))
		all[e.Index] = e.Data
	}
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := range int64(n) {
		hs, err := tlog.StoredHashes(i, all[i], r)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	want, _ := tlog.TreeHash(n, r)
	got, err := l.TreeHash(ctx, n)
	if err != nil || got != want {
		t.Fatalf("root %s (%v), recomputed %s", got, err, want)
	}
}
