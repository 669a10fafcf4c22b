package translog

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

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
	return appendData(ctx, tx, e.Type, e.ClaimID, e.ID, data)
}

func appendData(ctx context.Context, q querier, typ tlogfmt.EntryType, claimID, recordID string, data []byte) (int64, error) {
	var size int64
	if err := q.QueryRowContext(ctx, `UPDATE log_head SET size = size + 1 WHERE id = 1 RETURNING size`).Scan(&size); err != nil {
		return 0, fmt.Errorf("log head: %w", err)
	}
	n := size - 1
	hashes, err := tlog.StoredHashes(n, data, hashReader{ctx, q})
	if err != nil {
		return 0, fmt.Errorf("log entry %d: %w", n, err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO log_entries (idx, type, claim_id, record_id, body) VALUES ($1, $2, $3, $4, $5)`,
		n, string(typ), claimID, recordID, data); err != nil {
		return 0, fmt.Errorf("log entry %s %s (a record is logged once): %w", typ, recordID, err)
	}
	if err := insertHashes(ctx, q, tlog.StoredHashIndex(0, n), hashes); err != nil {
		return 0, fmt.Errorf("log entry %d: %w", n, err)
	}
	return n, nil
}

// insertHashes stores hashes at consecutive stored-hash indexes from first,
// in one statement.
func insertHashes(ctx context.Context, q querier, first int64, hashes []tlog.Hash) error {
	var sb strings.Builder
	sb.WriteString(`INSERT INTO log_hashes (idx, hash) VALUES `)
	args := make([]any, 0, 2*len(hashes))
	for i, h := range hashes {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("($" + strconv.Itoa(2*i+1) + ", $" + strconv.Itoa(2*i+2) + ")")
		args = append(args, first+int64(i), h[:])
	}
	_, err := q.ExecContext(ctx, sb.String(), args...)
	return err
}
