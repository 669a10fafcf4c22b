package translog

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/tlog"
)

// Append logs e in the caller's transaction tx and returns its index. The
// entry becomes part of the tree when tx commits and vanishes with it on
// rollback, so a record and its entry exist together or not at all.
//
// Append updates the one log_head row first: on PostgreSQL the row lock
// orders appends from every process until tx ends, so call it last in a
// transaction to hold the lock briefly. It fails when e does not encode
// (tlogfmt.Entry.Encode) or when the same type and id were logged already
// (no entry twice).
func (l *Log) Append(ctx context.Context, tx *sql.Tx, e tlogfmt.Entry) (int64, error) {
	data, err := e.Encode()
	if err != nil {
		return 0, err
	}
	typ, claimID, recordID := e.Type, e.ClaimID, e.ID
	var size int64
	if err := tx.StmtContext(ctx, l.bumpHead).QueryRowContext(ctx).Scan(&size); err != nil {
		return 0, fmt.Errorf("log head: %w", err)
	}
	n := size - 1
	hashes, err := tlog.StoredHashes(n, data, hashReader{ctx, tx})
	if err != nil {
		return 0, fmt.Errorf("log entry %d: %w", n, err)
	}
	packed := make([]byte, 0, len(hashes)*tlog.HashSize)
	for _, h := range hashes {
		packed = append(packed, h[:]...)
	}
	if _, err := tx.StmtContext(ctx, l.insertEntry).ExecContext(ctx, n, string(typ), claimID, recordID, data, packed); err != nil {
		return 0, fmt.Errorf("log entry %s %s (a record is logged once): %w", typ, recordID, err)
	}
	return n, nil
}

// The two statements of every append, prepared once on the write pool.
const (
	bumpHeadSQL    = `UPDATE log_head SET size = size + 1 WHERE id = 1 RETURNING size`
	insertEntrySQL = `INSERT INTO log_entries (idx, type, claim_id, record_id, body, hashes) VALUES ($1, $2, $3, $4, $5, $6)`
)
