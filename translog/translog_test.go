package translog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TestAppendProveAndCheck appends entries on each engine and checks every
// inclusion proof and consistency proof against signed checkpoints.
func TestAppendProveAndCheck(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{Origin: "test.dotlab/log"})
			appendN(t, d, l, 0, 300)
			old := checkpoint(t, l)
			appendN(t, d, l, 300, 230)
			cp := checkpoint(t, l)
			if cp.Size != 530 || old.Size != 300 {
				t.Fatalf("sizes %d, %d; want 300, 530", old.Size, cp.Size)
			}
			for i := int64(0); i < cp.Size; i += 17 {
				e, err := l.Lookup(ctx, tlogfmt.TypeMessage, testEntry(int(i)).ID)
				if err != nil || e.Index != i {
					t.Fatalf("lookup %d: %v %+v", i, err, e)
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
			if _, err := l.InclusionProof(ctx, 5, cp.Size+1); dotlab.ErrorCode(err) != dotlab.EINVALID {
				t.Fatalf("proof past the tree: %v", err)
			}
			es, err := l.ClaimEntries(ctx, "DL-0003", cp.Size)
			if err != nil || len(es) != 76 {
				t.Fatalf("claim entries: %d, %v; want 76", len(es), err)
			}
		})
	}
}

// checkpoint fetches the log's checkpoint and verifies its signature.
func checkpoint(t *testing.T, l *translog.Log) tlogfmt.Checkpoint {
	t.Helper()
	_, signed, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(signed, note.VerifierList(l.Verifier()))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := tlogfmt.ParseCheckpoint(n.Text)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Origin != l.Origin() {
		t.Fatalf("origin %q, want %q", cp.Origin, l.Origin())
	}
	return cp
}

// TestRollbackAndDuplicate: an entry rolls back with its transaction and
// leaves no gap; the same record cannot be logged twice.
func TestRollbackAndDuplicate(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{})
			appendN(t, d, l, 0, 3)
			tx, _ := d.w.BeginTx(ctx, nil)
			if err := l.Append(ctx, tx, testEntry(3)); err != nil {
				t.Fatalf("append: %v", err)
			}
			tx.Rollback()
			tx, _ = d.w.BeginTx(ctx, nil)
			if err := l.Append(ctx, tx, testEntry(1)); err == nil || !strings.Contains(err.Error(), "logged once") {
				t.Fatalf("duplicate: %v", err)
			}
			tx.Rollback()
			appendN(t, d, l, 3, 1)
			if e, err := l.Lookup(ctx, tlogfmt.TypeMessage, testEntry(3).ID); err != nil || e.Index != 3 {
				t.Fatalf("after rollback: %+v %v", e, err)
			}
			if size, _ := l.Size(ctx); size != 4 {
				t.Fatalf("size %d, want 4", size)
			}
		})
	}
}

// TestKeyKeptAcrossOpens: the key and origin made at the first start are
// kept; another origin later is refused.
func TestKeyKeptAcrossOpens(t *testing.T) {
	u := sqlstoretest.URL(t, sqlstore.SQLite)
	d := reopenDB(t, sqlstore.SQLite, u)
	l := d.open(t, translog.Options{})
	if !strings.HasPrefix(l.Origin(), "dotlab.log/") || !strings.HasPrefix(l.VerifierKey(), l.Origin()+"+") {
		t.Fatalf("origin %q, key %q", l.Origin(), l.VerifierKey())
	}
	again := reopenDB(t, sqlstore.SQLite, u).open(t, translog.Options{Origin: l.Origin()})
	if again.VerifierKey() != l.VerifierKey() {
		t.Fatal("key changed on reopening")
	}
	if _, err := translog.Open(context.Background(), d.w, d.r, d.dialect, translog.Options{Origin: "other.example/log"}); err == nil {
		t.Fatal("another origin accepted")
	}
}
