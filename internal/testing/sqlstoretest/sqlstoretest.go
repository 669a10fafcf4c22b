// Package sqlstoretest opens real stores for tests: a SQLite file in a temp
// dir, and a fresh schema on the PostgreSQL server of the machine
// (127.0.0.1:5432, database test, trust auth; override with
// DOTLAB_TEST_POSTGRES). PostgreSQL tests skip when the server is missing,
// except in CI (CI=true), where they fail instead.
package sqlstoretest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
)

// Engines are the storage engines every contract test runs on.
var Engines = []sqlstore.Dialect{sqlstore.SQLite, sqlstore.Postgres}

// PostgresURL is the server the tests use.
func PostgresURL() string {
	if u := os.Getenv("DOTLAB_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// URL returns a database URL for a fresh, empty database of the engine,
// removed when the test ends. Two Opens of the same URL share the database
// (for restart and multi-process tests).
func URL(t testing.TB, engine sqlstore.Dialect) string {
	t.Helper()
	switch engine {
	case sqlstore.SQLite:
		return "sqlite:" + filepath.Join(t.TempDir(), "dotlab.db")
	case sqlstore.Postgres:
		base := PostgresURL()
		admin, err := sql.Open("pgx", base)
		if err == nil {
			err = admin.Ping()
		}
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("PostgreSQL at %s is required in CI: %v", base, err)
			}
			t.Skipf("PostgreSQL at %s not reachable (%v); skipping outside CI", base, err)
		}
		b := make([]byte, 6)
		rand.Read(b)
		schema := "t_" + hex.EncodeToString(b)
		if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
			admin.Close()
		})
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	t.Fatalf("unknown engine %q", engine)
	return ""
}

// Open opens a fresh store of the engine, closed when the test ends.
func Open(t testing.TB, engine sqlstore.Dialect, opt sqlstore.Options) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), URL(t, engine), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Protocol is the protocol service (package protocol) on db, without a
// secret screen (a test that checks the screen gives protocol.New one):
// the store's tests take the protocol's steps through it. Its key proofs
// are checked against db's log origin (LogOrigin), as a server's are.
func Protocol(db *sqlstore.DB) *protocol.Service {
	return protocol.New(protocol.Config{Store: db, AllowPrivateURLs: true, Unscreened: true, LogOrigin: LogOrigin(db)})
}

// LogOrigin is db's transparency log origin, "" when it keeps no log: the
// origin a key proof for Protocol(db) signs (attest.Key.KeyProof).
func LogOrigin(db *sqlstore.DB) string {
	if l := db.Log(); l != nil {
		return l.Origin()
	}
	return ""
}
