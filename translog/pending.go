package translog

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
)

// Migration 00002 (a Go migration: the pending table's id is a sequence on
// PostgreSQL and the rowid on SQLite, which no one SQL text spells):
//
//   - log_pending holds entries written by record transactions and not yet
//     sequenced. Its id orders them (a causally later record commits after
//     an earlier one began, so it has a larger id); nothing in it is shared
//     between writers, so record transactions never wait on each other for
//     the log.
//   - log_head gains the checkpoint the sequencer signed for its size,
//     written in the same transaction as the entries it covers.
func pendingMigration(dialect string) *goose.Migration {
	id := `INTEGER PRIMARY KEY`
	if dialect == Postgres {
		id = `BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY`
	}
	up := []string{
		`CREATE TABLE log_pending (
    id        ` + id + `,
    type      TEXT NOT NULL,
    claim_id  TEXT NOT NULL,
    record_id TEXT NOT NULL,
    body      BYTEA NOT NULL,
    UNIQUE (type, record_id)
)`,
		`ALTER TABLE log_head ADD COLUMN checkpoint_size BIGINT`,
		`ALTER TABLE log_head ADD COLUMN checkpoint TEXT`,
	}
	down := []string{
		`ALTER TABLE log_head DROP COLUMN checkpoint`,
		`ALTER TABLE log_head DROP COLUMN checkpoint_size`,
		`DROP TABLE log_pending`,
	}
	return goose.NewGoMigration(2, &goose.GoFunc{RunTx: runAll(up)}, &goose.GoFunc{RunTx: runAll(down)})
}

func runAll(stmts []string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("log migration 2: %w", err)
			}
		}
		return nil
	}
}
