package clustertest

import (
	"context"
	"database/sql"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/internal/testing/tlogcheck"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestCrashMidBatchPostgres (docs/verification.md "Sequencing"): two
// `dotlab serve` processes on one PostgreSQL behind HAProxy while 64
// agents post lab messages. The test holds a row the next batch must
// write (an uncommitted log_entries row at the head's index), so the
// process that is sequencing stops inside its batch — head row locked,
// pending entries taken, entries being written — and that process is
// killed with SIGKILL there. The other process becomes the sequencer and
// the posting goes on. Afterwards nothing is left pending, the log has one
// entry per message with no gap and is consistent with the tree read
// before the kill, every entry verifies against the checkpoint with a
// verifier of third-party code, every message's inclusion proof from the
// API verifies, and `dotlab verify` passes for every room.
func TestCrashMidBatchPostgres(t *testing.T) {
	testfix.Exclusive(t)
	needHAProxy(t)
	if testing.Short() {
		t.Skip("-short: two servers and a kill")
	}
	db := sqlstoretest.URL(t, sqlstore.Postgres)
	servers, lb := startCluster(t, db+"&pool_max_conns=8", 2, "--rate-agent", "0", "--rate-anon", "0")
	cw := setupCrash(t, lb.URL())
	st := &stream{sent: map[string]bool{}, errs: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); st.run(ctx, lb.URL(), cw.writers) }()
	st.waitAcked(t, 500)
	verifyCfg := t.TempDir()
	before := cw.pinLog(t, verifyCfg)
	raw := openRaw(t, db)
	blocker := holdNextIndex(t, raw.DB)
	victim := waitSequencerBlocked(t, raw.DB)
	var held int
	raw.QueryRow(`SELECT COUNT(*) FROM log_pending`).Scan(&held) // the victim's taken rows still count: its delete is uncommitted
	for _, s := range servers {
		if "dotlab-"+s.Name == victim {
			if err := s.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ackedAtKill := st.acked.Load()
	t.Logf("killed %s inside its batch at %d acknowledged writes, %d entries pending", victim, ackedAtKill, held)
	time.Sleep(300 * time.Millisecond)
	blocker.Rollback()
	st.waitAcked(t, ackedAtKill+1000)
	st.stop.Store(true)
	<-done
	t.Logf("%d writes acknowledged; failures: %v", st.acked.Load(), st.errs)
	waitNothingPending(t, raw.DB)
	cw.checkMessages(t, st)
	cw.checkLog(t, raw, before)
	checkEveryProof(t, cw, raw.DB)
	for _, room := range cw.rooms {
		if out, errOut, code := cli(t, verifyCfg, "verify", room, "--server", lb.URL()); code != 0 {
			t.Errorf("dotlab verify %s after the crash: %d\n%s%s", room, code, out, errOut)
		}
	}
}

// holdNextIndex inserts, uncommitted, a log_entries row at the head's
// index: the next batch's INSERT of that index waits for this
// transaction. Rolling it back lets the batch go on.
func holdNextIndex(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	for range 100 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(`INSERT INTO log_entries (idx, type, claim_id, record_id, body, hashes)
			VALUES ((SELECT size FROM log_head), 'blocker', 'DL-0000', 'blocker', '', '')`)
		if err == nil {
			t.Cleanup(func() { tx.Rollback() })
			return tx
		}
		tx.Rollback() // a batch took that index first
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("could not hold the next log index")
	return nil
}

// waitSequencerBlocked returns the application_name of the server whose
// batch waits to write its entries (at most 20 s).
func waitSequencerBlocked(t *testing.T, db *sql.DB) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var name string
		err := db.QueryRow(`SELECT application_name FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO log_entries%'
			AND application_name LIKE 'dotlab-s%' LIMIT 1`).Scan(&name)
		if err == nil {
			return name
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := counts(t, rawDB{DB: db}, `SELECT application_name || ' ' || COALESCE(wait_event_type, '-') || ' ' || LEFT(query, 60), COUNT(*)
		FROM pg_stat_activity WHERE datname = current_database() GROUP BY 1`)
	t.Fatalf("no server's batch blocked on the held index within 20 s; backends: %v", seen)
	return ""
}

// waitNothingPending waits (at most 5 s) until every entry is integrated.
func waitNothingPending(t *testing.T, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM log_pending`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries still pending 5 s after the writes stopped", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkEveryProof verifies every log entry against the served checkpoint
// (tlogcheck, third-party code) and every lab message's inclusion proof
// as the API serves it (transparency-dev/merkle).
func checkEveryProof(t *testing.T, cw *crashWorld, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	tree, err := tlogcheck.Fetch(ctx, http.DefaultClient, cw.c.Server()+"/log/", cw.status.Log.VerifierKey)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < tree.Size; i++ {
		if err := tree.CheckInclusion(i); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	rows, err := db.Query(`SELECT id FROM lab_messages`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		e, err := cw.c.LogEntry(ctx, "message", id, tree.Size)
		if err != nil {
			t.Fatalf("message %s: %v", id, err)
		}
		hashes := make([][]byte, len(e.InclusionProof))
		for i, h := range e.InclusionProof {
			if hashes[i], err = base64.StdEncoding.DecodeString(h); err != nil {
				t.Fatal(err)
			}
		}
		leaf := rfc6962.DefaultHasher.HashLeaf([]byte(e.Entry))
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(e.Index), uint64(tree.Size), leaf, hashes, tree.Root[:]); err != nil {
			t.Fatalf("message %s (entry %d): %v", id, e.Index, err)
		}
	}
	t.Logf("%d entries and %d message proofs verified at size %d", tree.Size, len(ids), tree.Size)
}
