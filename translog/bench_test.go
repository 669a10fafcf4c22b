package translog_test

import (
	"context"
	"testing"

	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// BenchmarkSequenceSQLite is the log's sequencing rate on SQLite: each entry
// appended in a transaction of its own, as a record write does (goal: at
// least Tessera's ~2,900 entries/s on one POSIX node; README
// "Transparency log").
func BenchmarkSequenceSQLite(b *testing.B) {
	d := openDB(b, sqlstore.SQLite)
	l := d.open(b, translog.Options{Origin: "bench.test/log"})
	appendN(b, d, l, 0, 1000)
	b.ResetTimer()
	appendN(b, d, l, 1000, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	if size, _ := l.Size(context.Background()); size != int64(1000+b.N) {
		b.Fatalf("size %d", size)
	}
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

// BenchmarkSequencePostgres is BenchmarkSequenceSQLite on PostgreSQL.
func BenchmarkSequencePostgres(b *testing.B) {
	d := openDB(b, sqlstore.Postgres)
	l := d.open(b, translog.Options{Origin: "bench.test/log"})
	appendN(b, d, l, 0, 100)
	b.ResetTimer()
	appendN(b, d, l, 100, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkAppendInTxPostgres: appends alone, 100 to a transaction.
func BenchmarkAppendInTxPostgres(b *testing.B) {
	d := openDB(b, sqlstore.Postgres)
	l := d.open(b, translog.Options{Origin: "bench.test/log"})
	b.ResetTimer()
	appendBatches(b, d, l, 0, b.N, 100)
}
