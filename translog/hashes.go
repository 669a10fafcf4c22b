package translog

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// hashReader reads stored hashes (tlog.HashReader) from log_entries.hashes
// through q, in one query per call.
type hashReader struct {
	ctx context.Context
	q   querier
}

// storedAt is where the stored hash at tlog index x lives: the hash of
// level L, number m is made by appending entry ((m+1) << L) - 1, the last
// leaf of its subtree, as that entry's hash number L.
func storedAt(x int64) (entry int64, offset int) {
	level, m := tlog.SplitStoredHashIndex(x)
	return (m+1)<<level - 1, level
}

// ReadHashes returns the stored hashes at indexes, in their order, or an
// error naming the first one that is missing.
func (h hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	var sb strings.Builder
	sb.WriteString(`SELECT idx, hashes FROM log_entries WHERE idx IN (`)
	args := make([]any, 0, len(indexes))
	seen := make(map[int64]bool, len(indexes))
	for _, x := range indexes {
		e, _ := storedAt(x)
		if seen[e] {
			continue
		}
		seen[e] = true
		if len(args) > 0 {
			sb.WriteByte(',')
		}
		args = append(args, e)
		sb.WriteString("$" + strconv.Itoa(len(args)))
	}
	sb.WriteByte(')')
	rows, err := h.q.QueryContext(h.ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[int64][]byte, len(args))
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, err
		}
		found[idx] = b
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		e, off := storedAt(x)
		b := found[e]
		if len(b) < (off+1)*tlog.HashSize {
			return nil, fmt.Errorf("log hash %d (entry %d, level %d) is missing", x, e, off)
		}
		out[i] = tlog.Hash(b[off*tlog.HashSize : (off+1)*tlog.HashSize])
	}
	return out, nil
}
