package translog_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/tlogcheck"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
)

// TestThirdPartyVerifier: a verifier using only note, tlog and merkle reads
// the served checkpoint, tiles and bundles over HTTP (partial and full
// tiles at every level: three on SQLite, two on PostgreSQL), finds every
// entry, proves inclusion, and checks consistency between a checkpoint
// before and one after more appends.
func TestThirdPartyVerifier(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			total := int64(600) // two full level-0 tiles, partial level-0 and level-1 tiles
			if engine == sqlstore.SQLite {
				total = 1<<16 + 263 // a full level-1 tile and a level-2 tile
			}
			ctx := context.Background()
			d := openDB(t, engine)
			l := d.open(t, translog.Options{Origin: "verify.test/log"})
			srv := serve(t, l)
			prefix := srv.URL + translog.Prefix
			appendN(t, d, l, 0, 200)
			before, err := tlogcheck.Fetch(ctx, http.DefaultClient, prefix, l.VerifierKey())
			if err != nil {
				t.Fatal(err)
			}
			appendBatches(t, d, l, 200, int(total)-200, 2000)
			after, err := tlogcheck.Fetch(ctx, http.DefaultClient, prefix, l.VerifierKey())
			if err != nil {
				t.Fatal(err)
			}
			if before.Size != 200 || after.Size != total || int64(len(after.Entries)) != total {
				t.Fatalf("sizes %d, %d (%d entries)", before.Size, after.Size, len(after.Entries))
			}
			for i, e := range after.Entries[:300] {
				want, _ := testEntry(i).Encode()
				if string(e) != string(want) {
					t.Fatalf("entry %d: %s, want %s", i, e, want)
				}
			}
			for _, i := range []int64{0, 1, 199, 255, 256, 511, 512, total / 2, total - 1} {
				if err := after.CheckInclusion(i); err != nil {
					t.Fatalf("inclusion of %d: %v", i, err)
				}
			}
			if err := after.CheckConsistency(before); err != nil {
				t.Fatalf("consistency: %v", err)
			}
		})
	}
}

// TestForkCaught: a log rebuilt from scratch under the same key with one
// entry altered signs checkpoints that a verifier holding an earlier
// checkpoint refuses, at the same size and at a larger one.
func TestForkCaught(t *testing.T) {
	ctx := context.Background()
	a := openDB(t, sqlstore.SQLite)
	la := a.open(t, translog.Options{Origin: "fork.test/log"})
	appendN(t, a, la, 0, 300)
	old, err := tlogcheck.Fetch(ctx, http.DefaultClient, serve(t, la).URL+translog.Prefix, la.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	b := openDB(t, sqlstore.SQLite)
	b.open(t, translog.Options{Origin: "other.test/log"}) // creates the tables
	if _, err := b.w.Exec(`DELETE FROM log_signer`); err != nil {
		t.Fatal(err)
	}
	var skey, vkey string
	a.w.QueryRow(`SELECT signer_key, verifier_key FROM log_signer`).Scan(&skey, &vkey)
	if _, err := b.w.Exec(`INSERT INTO log_signer (id, signer_key, verifier_key) VALUES (1, $1, $2)`, skey, vkey); err != nil {
		t.Fatal(err)
	}
	lb := b.open(t, translog.Options{})
	appendN(t, b, lb, 0, 120)
	altered := testEntry(120)
	altered.Record = tlogfmt.MessageRecord{AgentID: "ag_forger", Seq: 120}
	tx, _ := b.w.Begin()
	if err := lb.Append(ctx, tx, altered); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	lb.Await(ctx)
	appendN(t, b, lb, 121, 179)
	prefix := serve(t, lb).URL + translog.Prefix
	same, err := tlogcheck.Fetch(ctx, http.DefaultClient, prefix, vkey)
	if err != nil {
		t.Fatalf("the forked log's own checkpoint should verify alone: %v", err)
	}
	if err := same.CheckConsistency(old); err == nil {
		t.Fatal("a fork at the same size passed")
	}
	appendN(t, b, lb, 300, 40)
	bigger, err := tlogcheck.Fetch(ctx, http.DefaultClient, prefix, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if err := bigger.CheckConsistency(old); err == nil {
		t.Fatal("a fork at a larger size passed")
	}
}
