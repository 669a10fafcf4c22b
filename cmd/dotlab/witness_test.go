package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/witnesstest"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"github.com/dotlab/dotlab/verify"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TestWitnessRefusesForkAndVerifyNeedsItsCosignature runs the real
// transparency-dev/witness (omniwitness, pinned) on loopback for a log, and
// `dotlab serve --witness` on two databases with that log's key and
// origin: the honest one, and a fork copied from it after its first entry
// that then took other entries. The witness cosigns the honest log and
// refuses the fork (422 for its consistency proof, 409 naming the size it
// cosigned), and `dotlab verify --witness-key K --witnesses 1` passes on the
// honest log and fails on the fork's own entries — also when the fork's
// operator copies the honest log's cosignatures into its database — while
// the fork's shared first entry still verifies.
func TestWitnessRefusesForkAndVerifyNeedsItsCosignature(t *testing.T) {
	dbA := sqlstoretest.URL(t, sqlstore.SQLite)
	w := witnesstest.Start(t, "witness.test/w1", logKey(t, dbA))
	cfg := func(db string) server.Config {
		return server.Config{DB: db, Windows: dotlab.DefaultWindows, SettleEvery: 100 * time.Millisecond,
			Witnesses: []string{w.Flag}, WitnessEvery: 50 * time.Millisecond}
	}
	a := servertest.Start(t, cfg(dbA))
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	register(t, a, "honest")
	submit(t, a, "honest one", "DL-0001")
	waitCosigned(t, a, w, 1)
	dbB := sqlstoretest.URL(t, sqlstore.SQLite)
	sqlExec(t, dbA, `VACUUM INTO '`+strings.TrimPrefix(dbB, "sqlite:")+`'`)
	submit(t, a, "honest two", "DL-0002")
	waitCosigned(t, a, w, 2)

	var logB syncBuffer
	cfgB := cfg(dbB)
	cfgB.Logger = slog.New(slog.NewTextHandler(&logB, nil))
	b := servertest.Start(t, cfgB)
	register(t, b, "forker")
	submit(t, b, "forked two", "DL-0002")
	submit(t, b, "forked three", "DL-0003")
	// The fork's server sent its checkpoint: from the size it had kept (1)
	// the witness answered 409 (size 2), then 422 for the proof from 2.
	for i := 0; !strings.Contains(logB.String(), "422: the consistency proof does not verify"); i++ {
		if i == 200 {
			t.Fatalf("the fork's server logged no refusal by the witness within 20 s:\n%s", logB.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	forkRefused(t, b, w)

	verify := func(srv, claim string) (string, int) {
		t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir()) // a machine that never saw either log
		out, errOut, code := runCLI(t, "verify", "-v", "--server", srv, "--witness-key", w.Key, "--witnesses", "1", claim)
		return out + errOut, code
	}
	if out, code := verify(a, "DL-0002"); code != 0 || !strings.Contains(out, "witnessed: a tree of 2 entries or more is cosigned by 1 of the 1 witness keys given") {
		t.Fatalf("verify of the honest log: exit %d\n%s", code, out)
	}
	if out, code := verify(b, "DL-0002"); code == 0 || !strings.Contains(out, "not witnessed: witness.test/w1 cosigned tree size 1") {
		t.Fatalf("verify of the fork's entry: exit %d, want a failure naming it not witnessed\n%s", code, out)
	}
	if out, code := verify(b, "DL-0001"); code != 0 {
		t.Fatalf("verify of the entry the fork shares with the honest log (witnessed at size 1): exit %d\n%s", code, out)
	}
	agentKeepsWitnessed(t, a, b, w)
	// The fork's operator copies the honest log's cosignature (size 2) into
	// its database: it verifies, but is not consistent with the fork.
	var cp, cosig string
	var size, at int64
	sqlQueryRow(t, dbA, `SELECT size, checkpoint, cosignature, cosigned_at FROM log_cosignatures`, &size, &cp, &cosig, &at)
	sqlExec(t, dbB, `UPDATE log_cosignatures SET size = $1, checkpoint = $2, cosignature = $3, cosigned_at = $4`, size, cp, cosig, at)
	if out, code := verify(b, "DL-0002"); code == 0 || !strings.Contains(out, "witness witness.test/w1 cosigned tree size 2") || !strings.Contains(out, "not consistent with the checkpoint served now (size 3") {
		t.Fatalf("verify of the fork serving the honest cosignature: exit %d, want a failure naming the inconsistency\n%s", code, out)
	}
}

// agentKeepsWitnessed: the agent commands' checkpoint keeping
// (verify.Witness.Check with the witness policy, as `dotlab runner
// --witness-key K --witnesses 1` runs it after each step) passes on the
// honest log twice, and on the fork passes at first use (the witnessed
// size 1 is a prefix of the fork) but stops the agent (a *verify.Failure)
// at its next step: what it saw then (size 3) is never cosigned.
func agentKeepsWitnessed(t *testing.T, honest, fork string, w *witnesstest.Witness) {
	t.Helper()
	ctx := context.Background()
	for _, srv := range []string{honest, fork} {
		c, _ := client.New(srv, "")
		kept := verify.Witness{Path: filepath.Join(t.TempDir(), "logs.json"), Cosigning: verify.Cosigning{Keys: []string{w.Key}, Need: 1, Wait: time.Second}}
		if _, err := kept.Check(ctx, c); err != nil {
			t.Fatalf("%s: first check: %v", srv, err)
		}
		_, err := kept.Check(ctx, c)
		var f *verify.Failure
		switch {
		case srv == honest && err != nil:
			t.Fatalf("the honest log's second check: %v", err)
		case srv == fork && (!errors.As(err, &f) || !strings.Contains(err.Error(), "not witnessed")):
			t.Fatalf("the fork's second check: %v; want a failure, not witnessed", err)
		}
	}
}

// forkRefused checks that the fork's server got no cosignature for its
// tree and that the witness refuses the fork's checkpoint when sent again.
func forkRefused(t *testing.T, srv string, w *witnesstest.Witness) {
	t.Helper()
	ctx := context.Background()
	c, _ := client.New(srv, "")
	info, err := c.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 3 || strings.Contains(info.Checkpoint, "— "+w.Name+" ") || len(info.CosignedCheckpoints) != 1 || !strings.HasPrefix(info.CosignedCheckpoints[0], info.Origin+"\n1\n") {
		t.Fatalf("the fork's log: size %d, checkpoint %q, cosigned %q; want size 3 without cosignature, the shared size 1 cosigned only", info.Size, info.Checkpoint, info.CosignedCheckpoints)
	}
	n, err := note.Open([]byte(info.Checkpoint), note.VerifierList(mustVerifier(t, info.VerifierKey)))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := tlogfmt.ParseCheckpoint(n.Text)
	if err != nil {
		t.Fatal(err)
	}
	wit, err := translog.ParseWitness(w.Flag)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.LogConsistency(ctx, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	var proof tlog.TreeProof
	for _, h := range p.Proof {
		var x tlog.Hash
		b, _ := base64.StdEncoding.DecodeString(h)
		copy(x[:], b)
		proof = append(proof, x)
	}
	var refused *translog.WitnessError
	_, _, err = translog.AddCheckpoint(ctx, http.DefaultClient, wit, 2, proof, cp, []byte(info.Checkpoint))
	if !errors.As(err, &refused) || refused.Status != http.StatusUnprocessableEntity {
		t.Fatalf("the fork's checkpoint with its proof from the size the witness cosigned: %v; want 422", err)
	}
	_, _, err = translog.AddCheckpoint(ctx, http.DefaultClient, wit, 0, nil, cp, []byte(info.Checkpoint))
	if !errors.As(err, &refused) || refused.Status != http.StatusConflict || refused.Size != 2 {
		t.Fatalf("the fork's checkpoint from size 0: %v; want 409 naming the honest size 2", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func mustVerifier(t *testing.T, key string) note.Verifier {
	v, err := note.NewVerifier(key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// logKey makes the log of the database at url (its key, at first open) and
// returns its verifier key, as the witness is configured with it.
func logKey(t *testing.T, url string) string {
	db, err := sqlstore.Open(context.Background(), url, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return db.Log().VerifierKey()
}

func register(t *testing.T, srv, name string) {
	if _, errOut, code := runCLI(t, "agent", "register", "--server", srv, "--name", name, "--operator", "tests"); code != 0 {
		t.Fatalf("register: %s", errOut)
	}
}

func submit(t *testing.T, srv, title, want string) {
	t.Helper()
	out, errOut, code := runCLI(t, "claim", "submit", writeManifest(t, title, "https://data.example.org/sleep.csv"), "--server", srv, "--field", "statistics")
	if code != 0 || !strings.Contains(out, "listed "+want) {
		t.Fatalf("submit %q: exit %d %s %s; want %s listed", title, code, out, errOut, want)
	}
}

// waitCosigned waits until the server's checkpoint of size carries w's
// cosignature.
func waitCosigned(t *testing.T, srv string, w *witnesstest.Witness, size int64) {
	t.Helper()
	c, _ := client.New(srv, "")
	line := regexp.MustCompile("(?m)^— " + regexp.QuoteMeta(w.Name) + " ")
	for i := 0; i < 200; i++ {
		info, err := c.Log(context.Background())
		if err == nil && info.Size == size && line.MatchString(info.Checkpoint) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the checkpoint of size %d of %s carries no cosignature by %s within 20 s", size, srv, w.Name)
}

func sqlOpen(t *testing.T, url string) *sql.DB {
	db, err := sql.Open("sqlite", strings.TrimPrefix(url, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func sqlExec(t *testing.T, url, q string, args ...any) {
	t.Helper()
	if _, err := sqlOpen(t, url).Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func sqlQueryRow(t *testing.T, url, q string, dest ...any) {
	t.Helper()
	if err := sqlOpen(t, url).QueryRow(q).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestVerifyWitnessQuorum: with two real witnesses configured, `dotlab
// verify` with both keys requires both cosignatures (the default quorum)
// and passes; a key the server never sent checkpoints to counts for
// nothing, so --witnesses 2 with it fails and --witnesses 1 passes.
func TestVerifyWitnessQuorum(t *testing.T) {
	db := sqlstoretest.URL(t, sqlstore.SQLite)
	key := logKey(t, db)
	w1, w2 := witnesstest.Start(t, "witness.test/q1", key), witnesstest.Start(t, "witness.test/q2", key)
	stranger := witnesstest.Start(t, "witness.test/stranger", key)
	srv := servertest.Start(t, server.Config{DB: db, Windows: dotlab.DefaultWindows, SettleEvery: 100 * time.Millisecond,
		Witnesses: []string{w1.Flag, w2.Flag}, WitnessEvery: 50 * time.Millisecond})
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	register(t, srv, "quorum")
	submit(t, srv, "quorum one", "DL-0001")
	waitCosigned(t, srv, w1, 1)
	waitCosigned(t, srv, w2, 1)
	for _, tc := range []struct {
		args []string
		pass bool
	}{
		{[]string{"--witness-key", w1.Key, "--witness-key", w2.Key}, true},
		{[]string{"--witness-key", w1.Key, "--witness-key", stranger.Key, "--witnesses", "2"}, false},
		{[]string{"--witness-key", w1.Key, "--witness-key", stranger.Key, "--witnesses", "1"}, true},
		{[]string{"--witness-key", stranger.Key}, false},
	} {
		t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
		out, errOut, code := runCLI(t, append(append([]string{"verify", "--server", srv}, tc.args...), "DL-0001")...)
		if (code == 0) != tc.pass || (!tc.pass && !strings.Contains(out+errOut, "not witnessed")) {
			t.Errorf("verify %v: exit %d, want pass %v\n%s%s", tc.args, code, tc.pass, out, errOut)
		}
	}
	if _, errOut, code := runCLI(t, "verify", "--server", srv, "--witness-key", w1.Key, "--witnesses", "2", "DL-0001"); code == 0 || !strings.Contains(errOut, "--witnesses 2: only 1 --witness-key given") {
		t.Errorf("--witnesses past the keys given: exit %d %s", code, errOut)
	}
}
