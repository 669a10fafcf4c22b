package verify_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/tlogcheck"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"github.com/dotlab/dotlab/verify"
)

func wantFailure(t *testing.T, rep *verify.Report, parts ...string) {
	t.Helper()
	if rep.Passed() {
		t.Fatalf("verification passed; want a failure naming %q\n%s", parts, strings.Join(rep.OK, "\n"))
	}
	for _, f := range rep.Failures {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(f, p)
		}
		if all {
			return
		}
	}
	t.Fatalf("no failure names %q; failures:\n%s", parts, strings.Join(rep.Failures, "\n"))
}

func wantPass(t *testing.T, rep *verify.Report) {
	t.Helper()
	if !rep.Passed() {
		t.Fatalf("%s does not verify:\n%s", rep.Subject, strings.Join(rep.Failures, "\n"))
	}
}

// TestLifecycleVerifies: on both engines every record of a full lifecycle
// verifies — claim and run — and the third-party-only verifier (note,
// tlog, merkle over the served checkpoint and tiles) finds every record's
// entry, consistent between a checkpoint before and one after.
func TestLifecycleVerifies(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			e := newEnv(t, engine)
			ctx := context.Background()
			claim1, _ := e.lifecycle("first")
			vkey := e.db.Log().VerifierKey()
			before, err := tlogcheck.Fetch(ctx, http.DefaultClient, e.srv.URL+translog.Prefix, vkey)
			if err != nil {
				t.Fatal(err)
			}
			claim2, run2 := e.lifecycle("second")
			wantPass(t, e.verify(claim1))
			rep := e.verify(claim2)
			wantPass(t, rep)
			if len(rep.OK) < 16 {
				t.Fatalf("only %d checks:\n%s", len(rep.OK), strings.Join(rep.OK, "\n"))
			}
			wantPass(t, e.verify(run2))
			after, err := tlogcheck.Fetch(ctx, http.DefaultClient, e.srv.URL+translog.Prefix, vkey)
			if err != nil {
				t.Fatal(err)
			}
			if err := after.CheckConsistency(before); err != nil {
				t.Fatal(err)
			}
			counts := map[tlogfmt.EntryType]int{}
			for i, data := range after.Entries {
				l, err := tlogfmt.Decode(data)
				if err != nil {
					t.Fatal(err)
				}
				if err := after.CheckInclusion(int64(i)); err != nil {
					t.Fatal(err)
				}
				counts[l.Type]++
			}
			want := map[tlogfmt.EntryType]int{tlogfmt.TypeClaim: 2, tlogfmt.TypeOffer: 2, tlogfmt.TypeMessage: 6, tlogfmt.TypeRun: 2,
				tlogfmt.TypeChallenge: 4, tlogfmt.TypeVote: 6, tlogfmt.TypeSettlement: 2, tlogfmt.TypeEnvelope: 2 + 2 + 6}
			for typ, n := range want {
				if counts[typ] != n {
					t.Errorf("%d %s entries, want %d (all: %v)", counts[typ], typ, n, counts)
				}
			}
		})
	}
}

// TestRunRowChangedInSQLite: a run's row rewritten in the database is
// caught: the run differs from its log entry, naming the changed fields.
func TestRunRowChangedInSQLite(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	claimID, runID := e.lifecycle("tampered run")
	wantPass(t, e.verify(claimID))
	raw := rawDB(t, e)
	if _, err := raw.Exec(`UPDATE runs SET outcome = 'reproduced', comparisons = replace(comparisons, '"match":false', '"match":true') WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	e.restart() // its read cache serves the run as it read it until then
	rep := e.verify(claimID)
	wantFailure(t, rep, "run "+runID, "differs from its log entry", "outcome", "comparisons")
	wantFailure(t, e.verify(runID), "run "+runID, "differs from its log entry")
}

// TestMessageDeletedInPostgres: a lab message deleted from the database is
// caught: its entry has no record any more.
func TestMessageDeletedInPostgres(t *testing.T) {
	e := newEnv(t, sqlstore.Postgres)
	claimID, _ := e.lifecycle("deleted message")
	wantPass(t, e.verify(claimID))
	raw := rawDB(t, e)
	var id string
	if err := raw.QueryRow(`DELETE FROM lab_messages WHERE claim_id = $1 AND seq = 2 RETURNING id`, claimID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	wantFailure(t, e.verify(claimID), "lab message "+id, "is missing from the server's records")
}

// TestLogRebuiltWithOneEntryAltered: the operator rewrites a run row and
// rebuilds the whole log from scratch to match (same key, same size,
// altered entry), then restarts the server. Every proof in the new tree is
// valid, but it is not consistent with the checkpoint this machine saw.
func TestLogRebuiltWithOneEntryAltered(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	claimID, runID := e.lifecycle("forked log")
	wantPass(t, e.verify(claimID))
	e.stop()
	raw := rawDB(t, e)
	entries := readEntries(t, raw)
	if _, err := raw.Exec(`UPDATE runs SET outcome = 'reproduced', comparisons = replace(comparisons, '"match":false', '"match":true') WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM log_entries`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE log_head SET size = 0`); err != nil {
		t.Fatal(err)
	}
	l, err := translog.Open(context.Background(), raw, raw, translog.SQLite, translog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.Fill(context.Background(), int64(len(entries)), func(i int64) (tlogfmt.Entry, error) {
		le := entries[i]
		rec := le.Record
		if le.Type == tlogfmt.TypeRun && le.ID == runID {
			var r tlogfmt.RunRecord
			json.Unmarshal(rec, &r)
			r.Outcome = "reproduced"
			for j := range r.Comparisons {
				r.Comparisons[j].Match = true
			}
			rec, _ = json.Marshal(r)
		}
		return tlogfmt.Entry{Type: le.Type, V: le.V, ClaimID: le.ClaimID, ID: le.ID, Record: json.RawMessage(rec)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	rep := e.verify(claimID)
	wantFailure(t, rep, "log forked or rewrote history", "is not consistent with the one of size")
}

// rawDB opens the env's database directly, as someone holding it would.
func rawDB(t *testing.T, e *env) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", e.url
	if p, ok := strings.CutPrefix(e.url, "sqlite:"); ok {
		driver, dsn = "sqlite", sqlstore.SQLiteWriterDSN(p)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func readEntries(t *testing.T, db *sql.DB) []*tlogfmt.Logged {
	rows, err := db.Query(`SELECT body FROM log_entries ORDER BY idx`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []*tlogfmt.Logged
	for rows.Next() {
		var b []byte
		rows.Scan(&b)
		l, err := tlogfmt.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestBusyClaimVerifies: records keep coming while `dotlab verify` runs (a
// busy room, or another server process): one message is posted after the
// records were read but before the checkpoint (it is in the tree, so the
// records are read again; writes answer at their commit, so the test waits
// for its batch before serving the checkpoint), one after the checkpoint
// (the second read finds it, the tree does not hold it). Both are honest:
// the claim verifies, the later message left for the next verification.
func TestBusyClaimVerifies(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	ctx := context.Background()
	claimID, _ := e.lifecycle("busy")
	w := e.agent("writer")
	me := must(w.Me(ctx))
	must(w.JoinLab(ctx, claimID, dotlab.RoleCollaborator))
	post := func(body string) {
		if _, err := sqlstoretest.Protocol(e.db).PostLabMessage(ctx, me.ID, claimID, dotlab.LabMessageBody{Type: "note", To: "all", Body: body}); err != nil {
			t.Error(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/log":
			post("posted before the checkpoint")
			if err := e.db.Log().Await(ctx); err != nil { // in the tree the checkpoint signs
				t.Error(err)
			}
		case strings.HasPrefix(r.URL.Path, "/api/v1/log/claims/"):
			post("posted after the checkpoint")
		}
		e.api.ServeHTTP(rw, r)
	}))
	defer srv.Close()
	c := must(client.New(srv.URL, ""))
	rep, err := verify.Verifier{Client: c, Witness: verify.Witness{Path: filepath.Join(t.TempDir(), "logs.json")}}.Claim(ctx, claimID)
	if err != nil {
		t.Fatal(err)
	}
	wantPass(t, rep)
	if ok := strings.Join(rep.OK, "\n"); !strings.Contains(ok, "(#4): log entry") || !strings.Contains(ok, "(#5): made after the checkpoint") {
		t.Fatalf("want message #4 checked and #5 left for later:\n%s", ok)
	}
	wantPass(t, e.verify(claimID))
}
