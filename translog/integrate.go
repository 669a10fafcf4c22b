package translog

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

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

// The statements of a batch on SQLite (PostgreSQL: lockTakePostgres).
// Holding the head's row is the one sequencer's election: the process
// whose transaction holds it integrates; on PostgreSQL another one skips
// (FOR UPDATE SKIP LOCKED) instead of queueing behind it, on SQLite BEGIN
// IMMEDIATE already made the transaction the only writer.
const (
	lockHeadSQLite = `SELECT size FROM log_head WHERE id = 1`
	takePendingSQL = `DELETE FROM log_pending WHERE id IN (SELECT id FROM log_pending ORDER BY id LIMIT $1)
RETURNING id, type, claim_id, record_id, body,
    EXISTS (SELECT 1 FROM log_entries e WHERE e.type = log_pending.type AND e.record_id = log_pending.record_id)`
	setHeadSQL = `UPDATE log_head SET size = $1, checkpoint_size = $1, checkpoint = $2 WHERE id = 1`
)

// integrate runs one batch in one transaction: it takes up to maxBatch
// pending entries in id order, gives them the next indexes, writes them
// and their stored hashes to log_entries, advances log_head and stores the
// checkpoint of the new size signed by the log's key. A crash at any point
// leaves the whole batch integrated or none of it. On PostgreSQL a batch
// is four round trips (begin, take, write, commit), plus one to read older
// hashes when another process wrote the tree's last batch.
func (l *Log) integrate(ctx context.Context) (batchResult, error) {
	tx, err := l.beginBatch(ctx)
	if err != nil {
		return batchResult{}, err
	}
	defer tx.Rollback()
	size, rows, locked, err := l.lockAndTake(ctx, tx)
	if err != nil || !locked {
		return batchResult{busy: err == nil}, err
	}
	res := batchResult{size: size, full: len(rows) == l.maxBatch}
	if len(rows) == 0 {
		return res, nil
	}
	if rows = dropDuplicates(rows); len(rows) == 0 {
		return res, tx.Commit()
	}
	signed, edge, err := l.writeBatch(ctx, tx, size, rows)
	if err != nil {
		return batchResult{}, err
	}
	if err := tx.Commit(); err != nil {
		l.keepEdge(frontier{}) // the outcome is unknown: read the hashes next time
		return batchResult{}, err
	}
	res.size, res.entries = signed.cp.Size, len(rows)
	l.remember(signed)
	l.keepEdge(edge)
	return res, nil
}

// lockAndTake locks the head (locked false: another process's batch holds
// it) and deletes and returns up to maxBatch pending entries in id order,
// in one statement on PostgreSQL.
func (l *Log) lockAndTake(ctx context.Context, tx *sql.Tx) (size int64, rows []pendingEntry, locked bool, err error) {
	if l.dialect != Postgres {
		if err := tx.QueryRowContext(ctx, lockHeadSQLite).Scan(&size); err != nil {
			return 0, nil, false, fmt.Errorf("log head: %w", err)
		}
		rows, err = takePending(ctx, tx, l.maxBatch)
		return size, rows, true, err
	}
	rs, err := tx.QueryContext(ctx, lockTakePostgres, l.maxBatch)
	if err != nil {
		return 0, nil, false, fmt.Errorf("log head and pending entries: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		locked = true
		var id sql.NullInt64
		var typ, claimID, recordID sql.NullString
		var p pendingEntry
		var dup sql.NullBool
		if err := rs.Scan(&size, &id, &typ, &claimID, &recordID, &p.body, &dup); err != nil {
			return 0, nil, false, err
		}
		if id.Valid {
			p.id, p.typ, p.claimID, p.recordID, p.dup = id.Int64, typ.String, claimID.String, recordID.String, dup.Bool
			rows = append(rows, p)
		}
	}
	if err := rs.Err(); err != nil {
		return 0, nil, false, err
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	return size, rows, locked, nil
}

// lockTakePostgres is lockHeadPostgres and takePendingSQL in one
// statement: no row when another batch holds the head, one row with NULL
// entry columns when nothing is pending.
const lockTakePostgres = `WITH head AS (SELECT size FROM log_head WHERE id = 1 FOR UPDATE SKIP LOCKED),
taken AS (DELETE FROM log_pending WHERE EXISTS (SELECT 1 FROM head) AND id IN (SELECT id FROM log_pending ORDER BY id LIMIT $1)
    RETURNING id, type, claim_id, record_id, body,
        EXISTS (SELECT 1 FROM log_entries e WHERE e.type = log_pending.type AND e.record_id = log_pending.record_id) AS dup)
SELECT head.size, taken.id, taken.type, taken.claim_id, taken.record_id, taken.body, taken.dup FROM head LEFT JOIN taken ON true`

// beginBatch begins a batch's transaction. On PostgreSQL the batches run
// on a connection of their own, kept between batches: taken from the
// shared pool, a batch would queue behind every record write waiting for
// a connection (under load, tens of milliseconds), and every record
// waits for the batch; a pool smaller than minPoolForOwnConn is shared.
// SQLite has its one writer connection.
func (l *Log) beginBatch(ctx context.Context) (*sql.Tx, error) {
	if l.dialect != Postgres {
		return l.w.BeginTx(ctx, nil)
	}
	tx, err := l.beginPostgresBatch(ctx)
	if err != nil {
		return nil, err
	}
	// A batch holds log_head's row, which every process's sequencing
	// waits for: a process that hangs inside one (stopped, partitioned)
	// must not stall the log for all. PostgreSQL ends a session idle in
	// its transaction for BatchIdleTimeout, releasing the lock.
	if _, err := tx.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = `+fmt.Sprint(BatchIdleTimeout.Milliseconds())); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// BatchIdleTimeout is how long a PostgreSQL session may sit idle inside a
// batch's transaction before the server ends it (and so releases
// log_head's row for another process's sequencer).
const BatchIdleTimeout = 5 * time.Second

// beginPostgresBatch begins a batch's transaction on PostgreSQL, on the
// batches' own connection when the pool is large enough.
func (l *Log) beginPostgresBatch(ctx context.Context) (*sql.Tx, error) {
	if n := l.w.Stats().MaxOpenConnections; n > 0 && n < minPoolForOwnConn {
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

// minPoolForOwnConn: a smaller pool keeps all its connections for the
// requests (and the readiness check); the batches then take theirs from
// it.
const minPoolForOwnConn = 16

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

// writeBatch computes the batch's stored hashes and the new root, signs
// the checkpoint of the new size, writes the entries and the head, and
// returns the checkpoint and the grown tree's right edge.
func (l *Log) writeBatch(ctx context.Context, tx *sql.Tx, size int64, rows []pendingEntry) (signedCheckpoint, frontier, error) {
	bodies := make([][]byte, len(rows))
	for i := range rows {
		bodies[i] = rows[i].body
	}
	packed, root, edge, err := treeAppend(hashReader{ctx, tx}, size, bodies, l.edge(size))
	if err != nil {
		return signedCheckpoint{}, frontier{}, err
	}
	end := size + int64(len(rows))
	cp := tlogfmt.Checkpoint{Origin: l.Origin(), Size: end, Root: root}
	signed, err := note.Sign(&note.Note{Text: cp.Text()}, l.signer)
	if err != nil {
		return signedCheckpoint{}, frontier{}, err
	}
	const chunk = 200 // rows an INSERT: 1,200 parameters
	for first := 0; first < len(rows); first += chunk {
		last := min(first+chunk, len(rows))
		var head *signedCheckpoint // PostgreSQL: the head's update rides on the last INSERT
		if last == len(rows) && l.dialect == Postgres {
			head = &signedCheckpoint{cp, signed}
		}
		if err := insertEntries(ctx, tx, size+int64(first), rows[first:last], packed[first:last], head); err != nil {
			return signedCheckpoint{}, frontier{}, err
		}
	}
	if l.dialect != Postgres {
		if _, err := tx.ExecContext(ctx, setHeadSQL, end, string(signed)); err != nil {
			return signedCheckpoint{}, frontier{}, fmt.Errorf("log head: %w", err)
		}
	}
	return signedCheckpoint{cp, signed}, edge, nil
}

// insertEntries writes rows as entries first, first+1, … in one INSERT;
// with head, the same statement sets the log head to head's size and
// checkpoint (a PostgreSQL data-modifying WITH).
func insertEntries(ctx context.Context, tx *sql.Tx, first int64, rows []pendingEntry, packed [][]byte, head *signedCheckpoint) error {
	var sb strings.Builder
	if head != nil {
		sb.WriteString(`WITH ins AS (`)
	}
	sb.WriteString(`INSERT INTO log_entries (idx, type, claim_id, record_id, body, hashes) VALUES `)
	args := make([]any, 0, 6*len(rows)+2)
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
	if head != nil {
		n := len(args)
		fmt.Fprintf(&sb, `) UPDATE log_head SET size = $%d, checkpoint_size = $%d, checkpoint = $%d WHERE id = 1`, n+1, n+1, n+2)
		args = append(args, head.cp.Size, string(head.note))
	}
	if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
		return fmt.Errorf("log entries %d-%d: %w", first, first+int64(len(rows))-1, err)
	}
	return nil
}

// frontier is the right edge of a tree of size size: the stored hashes
// its root is made of (what appending to it reads), by stored-hash index.
type frontier struct {
	size   int64
	hashes map[int64]tlog.Hash
}

// edge returns the right edge this process kept when the tree it last
// grew has size size (nobody else wrote since), else nil.
func (l *Log) edge(size int64) map[int64]tlog.Hash {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastEdge.hashes == nil || l.lastEdge.size != size {
		return nil
	}
	return l.lastEdge.hashes
}

func (l *Log) keepEdge(f frontier) {
	l.mu.Lock()
	l.lastEdge = f
	l.mu.Unlock()
}

// treeAppend computes the stored hashes that appending bodies to the tree
// of size size makes (packed per entry, as log_entries.hashes holds them),
// the root of the grown tree and its right edge. The older stored hashes
// it needs come from known (the edge of size, when kept) or from db in one
// query: which ones depends on the indexes only, so a first pass with a
// recording reader learns them.
func treeAppend(db tlog.HashReader, size int64, bodies [][]byte, known map[int64]tlog.Hash) ([][]byte, tlog.Hash, frontier, error) {
	base := tlog.StoredHashIndex(0, size)
	end := size + int64(len(bodies))
	need := map[int64]bool{}
	record := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
		for _, x := range xs {
			if _, ok := known[x]; x < base && !ok {
				need[x] = true
			}
		}
		return make([]tlog.Hash, len(xs)), nil
	})
	for i, b := range bodies {
		if _, err := tlog.StoredHashes(size+int64(i), b, record); err != nil {
			return nil, tlog.Hash{}, frontier{}, err
		}
	}
	if _, err := tlog.TreeHash(end, record); err != nil {
		return nil, tlog.Hash{}, frontier{}, err
	}
	have, err := readNeeded(db, need, known)
	if err != nil {
		return nil, tlog.Hash{}, frontier{}, err
	}
	edge := frontier{size: end, hashes: map[int64]tlog.Hash{}}
	var ending bool // TreeHash(end) is reading: its hashes are the edge
	mem := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(xs))
		for i, x := range xs {
			h, ok := have[x]
			if !ok {
				return nil, fmt.Errorf("log hash %d is missing", x)
			}
			out[i] = h
			if ending {
				edge.hashes[x] = h
			}
		}
		return out, nil
	})
	packed := make([][]byte, len(bodies))
	for i, b := range bodies {
		n := size + int64(i)
		hs, err := tlog.StoredHashes(n, b, mem)
		if err != nil {
			return nil, tlog.Hash{}, frontier{}, err
		}
		at := tlog.StoredHashIndex(0, n)
		p := make([]byte, 0, len(hs)*tlog.HashSize)
		for j, h := range hs {
			have[at+int64(j)] = h
			p = append(p, h[:]...)
		}
		packed[i] = p
	}
	ending = true
	root, err := tlog.TreeHash(end, mem)
	return packed, root, edge, err
}

// readNeeded reads the stored hashes in need from db, and returns them
// with known's, by index.
func readNeeded(db tlog.HashReader, need map[int64]bool, known map[int64]tlog.Hash) (map[int64]tlog.Hash, error) {
	have := make(map[int64]tlog.Hash, len(need)+len(known)+64)
	for x, h := range known {
		have[x] = h
	}
	if len(need) == 0 {
		return have, nil
	}
	xs := make([]int64, 0, len(need))
	for x := range need {
		xs = append(xs, x)
	}
	hs, err := db.ReadHashes(xs)
	if err != nil {
		return nil, err
	}
	for i, x := range xs {
		have[x] = hs[i]
	}
	return have, nil
}
