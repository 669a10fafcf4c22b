package translog_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// BenchmarkDrainBacklogSQLite is the sequencer draining a backlog: b.N
// entries written pending first (500 to a transaction, untimed), then
// integrated by Sync in batches of DefaultMaxBatch (goal: at least
// Tessera's ~2,900 entries/s on one POSIX node; bench/README.md).
func BenchmarkDrainBacklogSQLite(b *testing.B) { benchDrain(b, sqlstore.SQLite) }

// BenchmarkDrainBacklogPostgres is BenchmarkDrainBacklogSQLite on
// PostgreSQL.
func BenchmarkDrainBacklogPostgres(b *testing.B) { benchDrain(b, sqlstore.Postgres) }

func benchDrain(b *testing.B, engine sqlstore.Dialect) {
	d := openDB(b, engine)
	l := d.open(b, translog.Options{Origin: "bench.test/log", Manual: true})
	pendN(b, d, l, 0, 1000, 500)
	if _, err := l.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	pendN(b, d, l, 1000, b.N, 500)
	b.ResetTimer()
	n, err := l.Sync(context.Background())
	b.StopTimer()
	if err != nil || n != b.N {
		b.Fatalf("integrated %d of %d: %v", n, b.N, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(l.Stats().Batches), "batches")
}

// BenchmarkSequenceConcurrentSQLite: 64 writers, each appending one entry
// in a transaction of its own and waiting for its integration (Await), as
// a record write does; the sequencer goroutine integrates in batches.
func BenchmarkSequenceConcurrentSQLite(b *testing.B) { benchConcurrent(b, sqlstore.SQLite) }

// BenchmarkSequenceConcurrentPostgres is the same on PostgreSQL.
func BenchmarkSequenceConcurrentPostgres(b *testing.B) { benchConcurrent(b, sqlstore.Postgres) }

func benchConcurrent(b *testing.B, engine sqlstore.Dialect) {
	d := openDB(b, engine)
	if engine == sqlstore.Postgres {
		d.w.SetMaxOpenConns(32)
	}
	l := d.open(b, translog.Options{Origin: "bench.test/log"})
	var next atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := int(next.Add(1))
			tx, err := d.w.BeginTx(ctx, nil)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Append(ctx, tx, testEntry(i)); err != nil {
				tx.Rollback()
				b.Error(err)
				return
			}
			if err := tx.Commit(); err != nil {
				b.Error(err)
				return
			}
			if err := l.Await(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := l.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(st.EntriesPerSecond(), "seq-entries/s")
	b.ReportMetric(float64(st.Entries)/max(1, float64(st.Batches)), "entries/batch")
}

// BenchmarkVerifyOneOfMillion: on a log of 1,000,000 entries (SQLite),
// one record's check as a verifier does it — the signed checkpoint, the
// entry, its inclusion proof from the server, the note's signature and the
// proof checked with transparency-dev/merkle. Proofs are logarithmic (20
// hashes here); goal under 100 ms.
func BenchmarkVerifyOneOfMillion(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	d := openDB(b, sqlstore.SQLite)
	l := d.open(b, translog.Options{Origin: "bench.test/log"})
	if err := l.Fill(ctx, n, func(i int64) (tlogfmt.Entry, error) { return testEntry(int(i)), nil }); err != nil {
		b.Fatal(err)
	}
	v := note.VerifierList(l.Verifier())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := testEntry(int(uint64(i)*7919) % n).ID
		_, signed, err := l.Checkpoint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		nt, err := note.Open(signed, v)
		if err != nil {
			b.Fatal(err)
		}
		cp, err := tlogfmt.ParseCheckpoint(nt.Text)
		if err != nil {
			b.Fatal(err)
		}
		e, err := l.Lookup(ctx, tlogfmt.TypeMessage, id)
		if err != nil {
			b.Fatal(err)
		}
		p, err := l.InclusionProof(ctx, e.Index, cp.Size)
		if err != nil {
			b.Fatal(err)
		}
		hashes := make([][]byte, len(p))
		for j := range p {
			hashes[j] = p[j][:]
		}
		leaf := rfc6962.DefaultHasher.HashLeaf(e.Data)
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(e.Index), uint64(cp.Size), leaf, hashes, cp.Root[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/verify")
}
