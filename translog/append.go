package translog

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dotlab/dotlab/tlogfmt"
)

// Append writes e as a pending entry in the caller's transaction tx: it
// commits with tx and vanishes with it on rollback, so a record and its
// entry exist together or not at all. The entry gets its index when the
// sequencer integrates it (sequencer.go), in a later transaction of its
// own; Await waits for that.
//
// Append touches no row another writer touches (log_pending's id is a
// sequence), so record transactions of every process commit side by side.
// It fails when e does not encode (tlogfmt.Entry.Encode) or when the same
// type and id were logged already (no entry twice).
func (l *Log) Append(ctx context.Context, tx *sql.Tx, e tlogfmt.Entry) error {
	data, err := e.Encode()
	if err != nil {
		return err
	}
	var logged bool
	err = tx.StmtContext(ctx, l.insertPending).QueryRowContext(ctx, string(e.Type), e.ClaimID, e.ID, data).Scan(&logged)
	if err == nil && logged {
		err = fmt.Errorf("already in the log")
	}
	if err != nil {
		return fmt.Errorf("log entry %s %s (a record is logged once): %w", e.Type, e.ID, err)
	}
	return nil
}

// insertPendingSQL writes a pending entry and says whether the record is
// already sequenced (then Append fails and the caller rolls back). A
// duplicate of a pending entry fails on log_pending's UNIQUE.
const insertPendingSQL = `INSERT INTO log_pending (type, claim_id, record_id, body) VALUES ($1, $2, $3, $4)
RETURNING EXISTS (SELECT 1 FROM log_entries e WHERE e.type = log_pending.type AND e.record_id = log_pending.record_id)`
