package translog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// pendingEntry is one row taken from log_pending by a batch.
type pendingEntry struct {
	id                     int64
	typ, claimID, recordID string
	body                   []byte
	dup                    bool // the record is in log_entries already: dropped
}

// batchResult is what one integration did.
type batchResult struct {
	entries int   // entries integrated
	size    int64 // the tree size after the batch
	full    bool  // the batch took MaxBatch rows: more may be pending
	busy    bool  // another sequencer (another process) held the head: nothing done
}

// The statements of a batch. lockHead is the one sequencer's election:
// the process whose transaction holds the head row integrates; on
// PostgreSQL another one skips (SKIP LOCKED) instead of queueing behind
// it, on SQLite BEGIN IMMEDIATE already made the transaction the only
// writer.
const (
	lockHeadPostgres = `SELECT size FROM log_head WHERE id = 1 FOR UPDATE SKIP LOCKED`
	lockHeadSQLite   = `SELECT size FROM log_head WHERE id = 1`
	takePendingSQL   = `DELETE FROM log_pending WHERE id IN (SELECT id FROM log_pending ORDER BY id LIMIT $1)
RETURNING id, type, claim_id, record_id, body,
    EXISTS (SELECT 1 FROM log_entries e WHERE e.type = log_pending.type AND e.record_id = log_pending.record_id)`
	setHeadSQL = `UPDATE log_head SET size = $1, checkpoint_size = $1, checkpoint = $2 WHERE id = 1`
)

// integrate runs one batch in one transaction: it takes up to maxBatch
// pending entries in id order, gives them the next indexes, writes them
// and their stored hashes to log_entries, advances log_head and stores the
// checkpoint of the new size signed by the log's key. A crash at any point
// leaves the whole batch integrated or none of it.
func (l *Log) integrate(ctx context.Context) (batchResult, error) {
	tx, err := l.beginBatch(ctx)
	if err != nil {
		return batchResult{}, err
	}
	defer tx.Rollback()
	lock := lockHeadSQLite
	if l.dialect == Postgres {
		lock = lockHeadPostgres
	}
	var size int64
	if err := tx.QueryRowContext(ctx, lock).Scan(&size); errors.Is(err, sql.ErrNoRows) {
		return batchResult{busy: true}, nil
	} else if err != nil {
		return batchResult{}, fmt.Errorf("log head: %w", err)
	}
	rows, err := takePending(ctx, tx, l.maxBatch)
	if err != nil {
		return batchResult{}, err
	}
	res := batchResult{size: size, full: len(rows) == l.maxBatch}
	if len(rows) == 0 {
		return res, nil
	}
	rows = dropDuplicates(rows)
	if len(rows) > 0 {
		signed, err := l.writeBatch(ctx, tx, size, rows)
		if err != nil {
			return batchResult{}, err
		}
		res.size, res.entries = size+int64(len(rows)), len(rows)
		if _, err := tx.ExecContext(ctx, setHeadSQL, res.size, string(signed.note)); err != nil {
			return batchResult{}, fmt.Errorf("log head: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return batchResult{}, err
		}
		l.remember(signed)
		return res, nil
	}
	return res, tx.Commit()
}

// beginBatch begins a batch's transaction. On PostgreSQL the batches run
// on a connection of their own, kept between batches: taken from the
// shared pool, a batch would queue behind every record write waiting for
// a connection (under load, tens of milliseconds), and every record
// waits for the batch. SQLite has its one writer connection.
func (l *Log) beginBatch(ctx context.Context) (*sql.Tx, error) {
	if l.dialect != Postgres {
		return l.w.BeginTx(ctx, nil)
	}
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.conn == nil {
		c, err := l.w.Conn(ctx)
		if err != nil {
			return nil, err
		}
		l.conn = c
	}
	tx, err := l.conn.BeginTx(ctx, nil)
	if err != nil {
		l.conn.Close() // a broken connection: the next batch takes another
		l.conn = nil
	}
	return tx, err
}

// releaseConn returns the batches' connection to the pool.
func (l *Log) releaseConn() {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
}

// takePending deletes and returns up to n pending entries, in id order.
func takePending(ctx context.Context, tx *sql.Tx, n int) ([]pendingEntry, error) {
	rs, err := tx.QueryContext(ctx, takePendingSQL, n)
	if err != nil {
		return nil, fmt.Errorf("pending log entries: %w", err)
	}
	defer rs.Close()
	var out []pendingEntry
	for rs.Next() {
		var p pendingEntry
		if err := rs.Scan(&p.id, &p.typ, &p.claimID, &p.recordID, &p.body, &p.dup); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// dropDuplicates leaves out entries whose record is sequenced already. A
// duplicate cannot be appended (Append checks log_entries and
// log_pending's UNIQUE), except in the instant a batch moves the first
// one from log_pending to log_entries; integrating it would fail the
// batch on log_entries' UNIQUE and stop the log, so it is dropped.
func dropDuplicates(rows []pendingEntry) []pendingEntry {
	out := rows[:0]
	for _, p := range rows {
		if !p.dup {
			out = append(out, p)
		}
	}
	return out
}

// writeBatch computes the batch's stored hashes and the new root, writes
// the entries, and returns the checkpoint of the new size, signed.
func (l *Log) writeBatch(ctx context.Context, tx *sql.Tx, size int64, rows []pendingEntry) (signedCheckpoint, error) {
	bodies := make([][]byte, len(rows))
	for i := range rows {
		bodies[i] = rows[i].body
	}
	packed, root, err := treeAppend(hashReader{ctx, tx}, size, bodies)
	if err != nil {
		return signedCheckpoint{}, err
	}
	const chunk = 200 // rows an INSERT: 1,200 parameters
	for first := 0; first < len(rows); first += chunk {
		end := min(first+chunk, len(rows))
		if err := insertEntries(ctx, tx, size+int64(first), rows[first:end], packed[first:end]); err != nil {
			return signedCheckpoint{}, err
		}
	}
	cp := tlogfmt.Checkpoint{Origin: l.Origin(), Size: size + int64(len(rows)), Root: root}
	signed, err := note.Sign(&note.Note{Text: cp.Text()}, l.signer)
	if err != nil {
		return signedCheckpoint{}, err
	}
	return signedCheckpoint{cp, signed}, nil
}

// insertEntries writes rows as entries first, first+1, … in one INSERT.
func insertEntries(ctx context.Context, tx *sql.Tx, first int64, rows []pendingEntry, packed [][]byte) error {
	var sb strings.Builder
	sb.WriteString(`INSERT INTO log_entries (idx, type, claim_id, record_id, body, hashes) VALUES `)
	args := make([]any, 0, 6*len(rows))
	for i, p := range rows {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		for j := 1; j <= 6; j++ {
			if j > 1 {
				sb.WriteByte(',')
			}
			sb.WriteString("$" + strconv.Itoa(len(args)+j))
		}
		sb.WriteByte(')')
		args = append(args, first+int64(i), p.typ, p.claimID, p.recordID, p.body, packed[i])
	}
	if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
		return fmt.Errorf("log entries %d-%d: %w", first, first+int64(len(rows))-1, err)
	}
	return nil
}

// treeAppend computes the stored hashes that appending bodies to the tree
// of size size makes (packed per entry, as log_entries.hashes holds them)
// and the root of the grown tree. It reads the older stored hashes it
// needs in one query: which ones depends on the indexes only, so a first
// pass with a recording reader learns them.
func treeAppend(db tlog.HashReader, size int64, bodies [][]byte) ([][]byte, tlog.Hash, error) {
	base := tlog.StoredHashIndex(0, size)
	end := size + int64(len(bodies))
	need := map[int64]bool{}
	record := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
		for _, x := range xs {
			if x < base {
				need[x] = true
			}
		}
		return make([]tlog.Hash, len(xs)), nil
	})
	for i, b := range bodies {
		if _, err := tlog.StoredHashes(size+int64(i), b, record); err != nil {
			return nil, tlog.Hash{}, err
		}
	}
	if _, err := tlog.TreeHash(end, record); err != nil {
		return nil, tlog.Hash{}, err
	}
	have, err := readNeeded(db, need)
	if err != nil {
		return nil, tlog.Hash{}, err
	}
	mem := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(xs))
		for i, x := range xs {
			h, ok := have[x]
			if !ok {
				return nil, fmt.Errorf("log hash %d is missing", x)
			}
			out[i] = h
		}
		return out, nil
	})
	packed := make([][]byte, len(bodies))
	for i, b := range bodies {
		n := size + int64(i)
		hs, err := tlog.StoredHashes(n, b, mem)
		if err != nil {
			return nil, tlog.Hash{}, err
		}
		at := tlog.StoredHashIndex(0, n)
		p := make([]byte, 0, len(hs)*tlog.HashSize)
		for j, h := range hs {
			have[at+int64(j)] = h
			p = append(p, h[:]...)
		}
		packed[i] = p
	}
	root, err := tlog.TreeHash(end, mem)
	return packed, root, err
}

// readNeeded reads the stored hashes in need from db, by index.
func readNeeded(db tlog.HashReader, need map[int64]bool) (map[int64]tlog.Hash, error) {
	xs := make([]int64, 0, len(need))
	for x := range need {
		xs = append(xs, x)
	}
	hs, err := db.ReadHashes(xs)
	if err != nil {
		return nil, err
	}
	have := make(map[int64]tlog.Hash, len(xs)+64)
	for i, x := range xs {
		have[x] = hs[i]
	}
	return have, nil
}
