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

// hashReader reads stored hashes (tlog.HashReader) from log_hashes through
// q, in one query per call.
type hashReader struct {
	ctx context.Context
	q   querier
}

// ReadHashes returns the stored hashes at indexes, in their order, or an
// error naming the first one that is missing.
func (h hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	var sb strings.Builder
	sb.WriteString(`SELECT idx, hash FROM log_hashes WHERE idx IN (`)
	args := make([]any, len(indexes))
	for i, x := range indexes {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("$" + strconv.Itoa(i+1))
		args[i] = x
	}
	sb.WriteByte(')')
	rows, err := h.q.QueryContext(h.ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[int64]tlog.Hash, len(indexes))
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, err
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("log hash %d is %d bytes", idx, len(b))
		}
		found[idx] = tlog.Hash(b)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		hash, ok := found[x]
		if !ok {
			return nil, fmt.Errorf("log hash %d is missing", x)
		}
		out[i] = hash
	}
	return out, nil
}
