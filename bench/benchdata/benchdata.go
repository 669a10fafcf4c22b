// Package benchdata fills DotLab stores for benchmarks: it bulk-loads funded
// claims with plain SQL (the same rows CreateClaim writes, in one
// transaction, far faster than one CreateClaim each) and opens a raw
// database/sql handle on a store's database with the store's own connection
// settings, for resets and for the "bare insert loop" baselines.
//
// It is used by bench/api and by sqlstore's benchmarks; it is not part of
// the server.
package benchdata

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
)

// Field is the field of science of every loaded claim.
const Field = "statistics"

// OpenRaw opens dbURL ("sqlite:PATH" or "postgres://…") with database/sql
// and the same settings sqlstore uses for its writer: for SQLite WAL,
// synchronous NORMAL, foreign keys, busy timeout 10 s, BEGIN IMMEDIATE and
// one connection; for PostgreSQL a pool of 32. The sqlstore package must be
// linked (it registers the "sqlite" and "pgx" drivers), which importing this
// package guarantees.
func OpenRaw(dbURL string) (*Raw, error) {
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := sql.Open("sqlite", sqlstore.SQLiteWriterDSN(path))
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		return &Raw{db, sqlstore.SQLite}, db.Ping()
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	return &Raw{db, sqlstore.Postgres}, db.Ping()
}

// Raw is a plain database/sql handle on a store's database.
type Raw struct {
	*sql.DB
	Dialect sqlstore.Dialect
}

// batchRows is how many claims one multi-row INSERT carries (12 parameters
// a claim: well under SQLite's and PostgreSQL's parameter limits).
const batchRows = 50

// LoadClaims lists n funded claims by submitterID in one transaction,
// writing what CreateClaim writes: the claim (with a real manifest from
// sqlstoretest.ManifestJSON, its canonical hash, a random draw key), the
// submitter role, the listed and funded events, and the claim counter. It
// returns the new claim ids in order. titlePrefix keeps manifests unique
// across calls on one database.
func LoadClaims(ctx context.Context, raw *Raw, submitterID string, n int, titlePrefix string) ([]string, error) {
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var first int64
	if err := tx.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'claim'`).Scan(&first); err != nil {
		return nil, err
	}
	now := dotlab.SystemClock{}.Now().UnixMilli()
	ids := make([]string, 0, n)
	for lo := 0; lo < n; lo += batchRows {
		hi := min(lo+batchRows, n)
		var claims, roles, events strings.Builder
		var cargs, rargs, eargs []any
		for i := lo; i < hi; i++ {
			num := first + int64(i) + 1
			id := dotlab.FormatClaimID(num)
			title := fmt.Sprintf("%s claim %d", titlePrefix, num)
			m := sqlstoretest.ManifestJSON(title)
			hash, err := manifest.Hash(m)
			if err != nil {
				return nil, err
			}
			sep := ","
			if i == lo {
				sep = ""
			}
			p := len(cargs)
			fmt.Fprintf(&claims, "%s($%d,$%d,$%d,$%d,$%d,'funded',$%d,$%d,'[]',$%d,$%d,$%d)", sep,
				p+1, p+2, p+3, p+4, p+5, p+6, p+7, p+8, p+9, p+10)
			cargs = append(cargs, id, num, title, Field, submitterID, hash, string(m), rand.Int64N(1<<62), now, now)
			p = len(rargs)
			fmt.Fprintf(&roles, "%s($%d,$%d,'submitter',$%d)", sep, p+1, p+2, p+3)
			rargs = append(rargs, id, submitterID, now)
			p = len(eargs)
			fmt.Fprintf(&events, "%s($%d,1,'listed',$%d,'listed'),($%d,2,'funded',$%d,'funded at once: bounties are not live (minimum bounty 0)')",
				sep, p+1, p+2, p+1, p+2)
			eargs = append(eargs, id, now)
			ids = append(ids, id)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO claims (id, number, title, field, submitter_id, state, manifest_hash,
			manifest_raw, requires, draw_key, created_at, updated_at) VALUES `+claims.String(), cargs...); err != nil {
			return nil, fmt.Errorf("load claims: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES `+roles.String(), rargs...); err != nil {
			return nil, fmt.Errorf("load roles: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO claim_events (claim_id, seq, state, at, detail) VALUES `+events.String(), eargs...); err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE counters SET value = $1 WHERE name = 'claim'`, first+int64(n)); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	// For SQLite, move the bulk load out of the WAL into the database file,
	// so that the measured work does not pay for checkpointing it. No
	// ANALYZE: the store never runs it, so a benchmark must not either
	// (see Analyze).
	if raw.Dialect == sqlstore.SQLite {
		if _, err := raw.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Analyze gathers planner statistics on the loaded tables, claims and
// roles (ANALYZE), which sqlstore never does by itself on SQLite;
// PostgreSQL's autovacuum does it some time after a bulk load. Benchmarks
// use it to show how the draw behaves once the planner knows the table
// sizes. The jobs table is left alone: analyzed while still empty, it would
// make PostgreSQL plan a sequential scan of jobs for every draw candidate,
// which no running server (whose jobs table only grows) would do.
func Analyze(ctx context.Context, raw *Raw) error {
	for _, table := range []string{"claims", "roles"} {
		if _, err := raw.ExecContext(ctx, `ANALYZE `+table); err != nil {
			return err
		}
	}
	return nil
}

// Agent registers an agent with no capabilities through the store and
// returns it with its API key.
func Agent(ctx context.Context, db *sqlstore.DB, name string) (*dotlab.Agent, string, error) {
	return protocol.New(protocol.Config{Store: db, Unscreened: true}).CreateAgent(ctx, dotlab.NewAgent{Name: name, Operator: "bench", Capabilities: []string{}})
}

// RunBody is a valid reproduced run body for claim id (a claim loaded by
// LoadClaims), as JSON, and the comparisons the server computes for it.
func RunBody(id string) (body []byte, comparisons []byte, err error) {
	b := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
	m, err := manifest.Parse(sqlstoretest.ManifestJSON("bench"))
	if err != nil {
		return nil, nil, err
	}
	cs, err := dotlab.EvaluateRun(m, b)
	if err != nil {
		return nil, nil, err
	}
	if body, err = json.Marshal(b); err != nil {
		return nil, nil, err
	}
	comparisons, err = json.Marshal(cs)
	return body, comparisons, err
}
