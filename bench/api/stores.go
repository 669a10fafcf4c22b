package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/dotlab/dotlab/sqlstore"
)

// stores hands out fresh, empty databases of one engine — a SQLite file in
// a temporary directory, or a new schema on a PostgreSQL server — and
// removes them all at close.
type stores struct {
	engine sqlstore.Dialect
	dir    string  // SQLite: the temporary directory
	pgURL  string  // PostgreSQL: the server
	admin  *sql.DB // PostgreSQL: creates and drops schemas
	made   []string
}

func newStores(engine sqlstore.Dialect, pgURL string) (*stores, error) {
	s := &stores{engine: engine, pgURL: pgURL}
	switch engine {
	case sqlstore.SQLite:
		dir, err := os.MkdirTemp("", "dotlab-bench-")
		if err != nil {
			return nil, err
		}
		s.dir = dir
	case sqlstore.Postgres:
		admin, err := sql.Open("pgx", pgURL)
		if err == nil {
			err = admin.Ping()
		}
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL at %s: %w (set -pg or DOTLAB_TEST_POSTGRES)", pgURL, err)
		}
		s.admin = admin
	default:
		return nil, fmt.Errorf("-db %q: sqlite or postgres", engine)
	}
	return s, nil
}

// fresh returns the URL of a new, empty database named after what it is for.
func (s *stores) fresh(ctx context.Context, name string) (string, error) {
	if s.engine == sqlstore.SQLite {
		return "sqlite:" + filepath.Join(s.dir, name+".db"), nil
	}
	b := make([]byte, 4)
	rand.Read(b)
	schema := "bench_" + name + "_" + hex.EncodeToString(b)
	if _, err := s.admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		return "", err
	}
	s.made = append(s.made, schema)
	u, err := url.Parse(s.pgURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return withApp(u.String()), nil
}

// engineVersion reports the database engine's version.
func (s *stores) engineVersion(ctx context.Context, db *sql.DB) string {
	var v string
	q := `SELECT 'SQLite ' || sqlite_version()`
	if s.engine == sqlstore.Postgres {
		q = `SELECT version()`
	}
	if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v
}

// close removes every database handed out.
func (s *stores) close() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	for _, schema := range s.made {
		if _, err := s.admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", schema, err)
		}
	}
	if s.admin != nil {
		s.admin.Close()
	}
}

// waits starts the PostgreSQL wait sampler when on (-pg-waits) and returns
// the function that stops it and prints what it saw under label.
func (s *stores) waits(on bool) func(label string) {
	if !on || s.admin == nil {
		return func(string) {}
	}
	w := startWaits(s.admin)
	return w.stop
}
