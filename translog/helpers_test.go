package translog_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
)

// testDB is a raw database of one engine with the pools translog uses.
type testDB struct {
	dialect string
	w, r    *sql.DB
}

// openDB opens a fresh database of engine (closed at the end of the test).
func openDB(t testing.TB, engine sqlstore.Dialect) testDB {
	t.Helper()
	return reopenDB(t, engine, sqlstoretest.URL(t, engine))
}

// reopenDB opens the database at dbURL (a sqlstoretest URL) again.
func reopenDB(t testing.TB, engine sqlstore.Dialect, dbURL string) testDB {
	t.Helper()
	d := testDB{dialect: string(engine)}
	var err error
	switch engine {
	case sqlstore.SQLite:
		path := strings.TrimPrefix(dbURL, "sqlite:")
		if d.w, err = sql.Open("sqlite", sqlstore.SQLiteWriterDSN(path)); err != nil {
			t.Fatal(err)
		}
		d.w.SetMaxOpenConns(1)
		if err := d.w.Ping(); err != nil {
			t.Fatal(err)
		}
		if d.r, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)"); err != nil {
			t.Fatal(err)
		}
	default:
		if d.w, err = sql.Open("pgx", dbURL); err != nil {
			t.Fatal(err)
		}
		d.r = d.w
	}
	t.Cleanup(func() {
		if d.r != d.w {
			d.r.Close()
		}
		d.w.Close()
	})
	return d
}

func (d testDB) open(t testing.TB, opt translog.Options) *translog.Log {
	t.Helper()
	l, err := translog.Open(context.Background(), d.w, d.r, d.dialect, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendN appends n test entries, each in its own transaction, numbered
// from first.
func appendN(t testing.TB, d testDB, l *translog.Log, first, n int) {
	t.Helper()
	appendBatches(t, d, l, first, n, 1)
}

// appendBatches appends n test entries numbered from first, per entries in
// each transaction, each transaction's entries integrated (Await) before
// the next begins.
func appendBatches(t testing.TB, d testDB, l *translog.Log, first, n, per int) {
	t.Helper()
	ctx := context.Background()
	for i := first; i < first+n; i += per {
		tx, err := d.w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := i; j < min(i+per, first+n); j++ {
			if err := l.Append(ctx, tx, testEntry(j)); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := l.Await(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testEntry is the i-th test entry: a lab message digest of claim DL-(i%7).
func testEntry(i int) tlogfmt.Entry {
	return tlogfmt.Entry{Type: tlogfmt.TypeMessage, ClaimID: dotlab.FormatClaimID(int64(i%7 + 1)), ID: fmt.Sprintf("m%06d", i),
		Record: tlogfmt.MessageRecord{AgentID: "ag_test", Seq: int64(i), SHA256: tlogfmt.TextSHA256(fmt.Sprint(i)), CreatedAt: "2026-01-02T03:04:05.000Z"}}
}

// serve serves the log's routes over HTTP, writing errors as the API does.
func serve(t testing.TB, l *translog.Log) *httptest.Server {
	mux := http.NewServeMux()
	for _, rt := range l.Routes() {
		mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := rt.Handle(w, r); err != nil {
				http.Error(w, strings.Join(dotlab.ErrorDetail(err), "; "), apiv1.ErrorStatus(dotlab.ErrorCode(err)))
			}
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
