package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/pressly/goose/v3"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestRunLogsFixedOnceAttached: logs are attached after publishing, only
// the bytes the run pinned, once; a repeat of them is harmless, also
// concurrently; the server's coverage judgement is stored on the run and
// counts in standing once the run is upheld (docs/protocol.md §6 "Logs",
// docs/mechanism.md §6).
func TestRunLogsFixedOnceAttached(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		runner, other := mustAgent(t, w.db, "runner"), mustAgent(t, w.db, "other")
		id := w.assigned("logs", runner)
		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		logs := sqlstoretest.Logs(body)
		_, err := sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id, logs)
		wantCode(t, err, dotlab.EWINDOWCLOSED) // publish first
		body.LogsSHA256 = sha256Hex(logs)
		run, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if run.LogsSHA256 != body.LogsSHA256 || run.LogsUploadedAt != nil || run.LogCoverage != nil {
			t.Fatalf("published run: %+v", run)
		}
		_, err = w.db.JobLogs(ctx, id)
		wantCode(t, err, dotlab.ENOTFOUND)
		_, err = sqlstoretest.Protocol(w.db).PutJobLogs(ctx, other.ID, id, logs)
		wantCode(t, err, dotlab.ENOTOFFERED)
		_, err = sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id, append([]byte("{}\n"), logs...))
		wantCode(t, err, dotlab.EINVALID)
		// CheckJobLogs makes the same checks from the hash alone.
		_, err = sqlstoretest.Protocol(w.db).CheckJobLogs(ctx, other.ID, id, body.LogsSHA256)
		wantCode(t, err, dotlab.ENOTOFFERED)
		_, err = sqlstoretest.Protocol(w.db).CheckJobLogs(ctx, runner.ID, id, strings.Repeat("0", 64))
		wantCode(t, err, dotlab.EINVALID)
		if r, err := sqlstoretest.Protocol(w.db).CheckJobLogs(ctx, runner.ID, id, body.LogsSHA256); err != nil || r.ID != run.ID || r.LogsUploadedAt != nil {
			t.Fatalf("check before the upload: %v %+v", err, r)
		}

		// Concurrent uploads of the pinned bytes: all succeed, one attaches.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id, logs)
				if err == nil && (r.LogCoverage == nil || !r.LogCoverage.Complete) {
					err = &dotlab.Error{Code: "test", Detail: []string{"no complete coverage returned"}}
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent identical upload: %v", err)
			}
		}
		run, err = w.db.FindRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		cov := run.LogCoverage
		if run.LogsUploadedAt == nil || cov == nil || !cov.Complete || cov.Required != 7 || cov.Covered != 7 || len(cov.Missing) != 0 {
			t.Fatalf("after upload: %+v coverage %+v", run, cov)
		}
		w.clock.Advance(time.Minute)
		again, err := sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id, logs)
		if err != nil || !again.LogsUploadedAt.Equal(*run.LogsUploadedAt) {
			t.Fatalf("repeat: %v %+v", err, again)
		}
		_, err = sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id, sqlstoretest.Logs(body, "compare"))
		wantCode(t, err, dotlab.ECONFLICT)
		if r, err := sqlstoretest.Protocol(w.db).CheckJobLogs(ctx, runner.ID, id, body.LogsSHA256); err != nil || r.LogsUploadedAt == nil {
			t.Fatalf("check of the attached bytes: %v %+v", err, r)
		}
		_, err = sqlstoretest.Protocol(w.db).CheckJobLogs(ctx, runner.ID, id, strings.Repeat("0", 64))
		wantCode(t, err, dotlab.ECONFLICT)
		if got, err := w.db.JobLogs(ctx, id); err != nil || string(got) != string(logs) {
			t.Fatalf("served logs: %v %q", err, got)
		}

		// A run published without logs_sha256 can have no logs.
		id2 := w.assigned("no logs hash", runner)
		body2 := sqlstoretest.RunBody(id2, "1.58", "1.17", dotlab.OutcomeReproduced)
		if _, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, body2, nil); err != nil {
			t.Fatal(err)
		}
		_, err = sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id2, sqlstoretest.Logs(body2))
		wantCode(t, err, dotlab.ECONFLICT)

		// An incomplete log is recorded as such, naming what is missing.
		id3 := w.assigned("log without comparisons", runner)
		body3 := sqlstoretest.RunBody(id3, "1.58", "1.17", dotlab.OutcomeReproduced)
		partial := sqlstoretest.Logs(body3, "compare")
		body3.LogsSHA256 = sha256Hex(partial)
		if _, err := sqlstoretest.Protocol(w.db).PublishRun(ctx, runner, body3, nil); err != nil {
			t.Fatal(err)
		}
		r3, err := sqlstoretest.Protocol(w.db).PutJobLogs(ctx, runner.ID, id3, partial)
		if err != nil {
			t.Fatal(err)
		}
		if c := r3.LogCoverage; c.Complete || c.Covered != 5 || len(c.Missing) != 2 ||
			!strings.HasPrefix(c.Missing[0], "comparison mean_diff:") || !strings.HasPrefix(c.Missing[1], "comparison sd_diff:") {
			t.Fatalf("partial coverage: %+v", c)
		}

		// Standing: three upheld runs, one of them with a complete log.
		w.clock.Advance(dotlab.DefaultWindows.Challenge)
		w.settle()
		p, err := w.db.FindAgent(ctx, runner.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.RunsUpheld != 3 || p.RunsWellLogged != 1 || p.Standing != 3*dotlab.WeightRunUpheld+dotlab.WeightRunWellLogged {
			t.Fatalf("profile: %+v", p)
		}
	})
}

// TestMigrationKeepsEarlierLogs: a run whose logs were uploaded before
// migration 00006 keeps them, served and marked uploaded but unjudged, and
// fixed (no logs_sha256 to match). Down and up again on both engines.
func TestMigrationKeepsEarlierLogs(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			url := sqlstoretest.URL(t, engine)
			db, err := sqlstore.Open(ctx, url, sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := &world{t: t, db: db, clock: nil, sub: mustAgent(t, db, "submitter")}
			runner := mustAgent(t, db, "runner")
			id := w.assigned("old logs", runner)
			run, err := sqlstoretest.Protocol(db).PublishRun(ctx, runner, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()

			raw, dialect := rawDB(t, engine, url)
			p, err := goose.NewProvider(dialect, raw, os.DirFS("migrations"), goose.WithGoMigrations(sqlstore.OutboxMigration(engine)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.DownTo(ctx, 5); err != nil {
				t.Fatal(err)
			}
			old := `{"t":"2025-12-31T00:00:00Z","level":"info","step":"run","msg":"uploaded under the old rules","data":{}}` + "\n"
			if _, err := raw.ExecContext(ctx, `INSERT INTO run_logs (claim_id, agent_id, logs, uploaded_at) VALUES ($1, $2, $3, $4)`,
				id, runner.ID, old, int64(1767139200000)); err != nil {
				t.Fatal(err)
			}
			raw.Close()

			db, err = sqlstore.Open(ctx, url, sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			got, err := db.FindRun(ctx, run.ID)
			if err != nil || got.LogsUploadedAt == nil || got.LogsUploadedAt.UnixMilli() != 1767139200000 || got.LogCoverage != nil || got.LogsSHA256 != "" {
				t.Fatalf("migrated run: %v %+v", err, got)
			}
			if logs, err := db.JobLogs(ctx, id); err != nil || string(logs) != old {
				t.Fatalf("migrated logs: %v %q", err, logs)
			}
			_, err = sqlstoretest.Protocol(db).PutJobLogs(ctx, runner.ID, id, []byte(old))
			wantCode(t, err, dotlab.ECONFLICT)
		})
	}
}

// rawDB opens the test database of a store URL directly, for goose.
func rawDB(t *testing.T, engine sqlstore.Dialect, url string) (*sql.DB, goose.Dialect) {
	t.Helper()
	driver, dsn, dialect := "pgx", url, goose.DialectPostgres
	if engine == sqlstore.SQLite {
		driver, dsn, dialect = "sqlite", strings.TrimPrefix(url, "sqlite:"), goose.DialectSQLite3
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return raw, dialect
}
