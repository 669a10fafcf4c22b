package translog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Size returns the tree size: the number of committed entries.
func (l *Log) Size(ctx context.Context) (int64, error) {
	var size int64
	err := l.r.QueryRowContext(ctx, `SELECT size FROM log_head WHERE id = 1`).Scan(&size)
	return size, err
}

// Checkpoint returns the checkpoint of the current tree and its signed
// note (c2sp.org/tlog-checkpoint as c2sp.org/signed-note, one Ed25519
// signature by the log's key): the one the sequencer stored with the
// head, or, for a head written without one (Fill, a log older than the
// sequencer), one signed now. Ed25519 is deterministic, so every server
// process signs the same note for the same size.
func (l *Log) Checkpoint(ctx context.Context) (tlogfmt.Checkpoint, []byte, error) {
	var size int64
	var cpSize sql.NullInt64
	var stored sql.NullString
	if err := l.r.QueryRowContext(ctx, `SELECT size, checkpoint_size, checkpoint FROM log_head WHERE id = 1`).Scan(&size, &cpSize, &stored); err != nil {
		return tlogfmt.Checkpoint{}, nil, err
	}
	l.mu.Lock()
	latest := l.latest
	l.mu.Unlock()
	if latest.note != nil && latest.cp.Size == size {
		return latest.cp, latest.note, nil
	}
	if stored.Valid && cpSize.Int64 == size {
		if sc, err := l.openCheckpoint([]byte(stored.String)); err == nil && sc.cp.Size == size {
			l.remember(sc)
			return sc.cp, sc.note, nil
		}
	}
	root, err := tlog.TreeHash(size, hashReader{ctx, l.r})
	if err != nil {
		return tlogfmt.Checkpoint{}, nil, fmt.Errorf("log root at %d: %w", size, err)
	}
	cp := tlogfmt.Checkpoint{Origin: l.Origin(), Size: size, Root: root}
	signed, err := note.Sign(&note.Note{Text: cp.Text()}, l.signer)
	if err != nil {
		return tlogfmt.Checkpoint{}, nil, err
	}
	l.remember(signedCheckpoint{cp, signed})
	return cp, signed, nil
}

// openCheckpoint verifies a stored checkpoint note with the log's key and
// parses it.
func (l *Log) openCheckpoint(signed []byte) (signedCheckpoint, error) {
	n, err := note.Open(signed, note.VerifierList(l.verifier))
	if err != nil {
		return signedCheckpoint{}, err
	}
	cp, err := tlogfmt.ParseCheckpoint(n.Text)
	return signedCheckpoint{cp, signed}, err
}

// Entry is one logged entry with its index.
type Entry struct {
	Index int64 // -1 while Pending
	Type  tlogfmt.EntryType
	ID    string
	Data  []byte // the entry as logged (tlogfmt canonical JSON)
	// Pending: written with its record, not yet integrated by the
	// sequencer (no index, in no checkpoint yet; Await).
	Pending bool
}

// Lookup returns the entry of the record with type typ and id: integrated,
// or Pending (Index -1) when its record committed and the sequencer has
// not integrated it yet; ENOTFOUND when there is neither.
func (l *Log) Lookup(ctx context.Context, typ tlogfmt.EntryType, id string) (Entry, error) {
	e := Entry{Type: typ, ID: id}
	err := l.r.QueryRowContext(ctx, `SELECT idx, body FROM log_entries WHERE type = $1 AND record_id = $2`, string(typ), id).Scan(&e.Index, &e.Data)
	if !errors.Is(err, sql.ErrNoRows) {
		return e, err
	}
	// The batch moving it commits both tables at once: one statement reads
	// either side consistently.
	err = l.r.QueryRowContext(ctx, `SELECT -1, body FROM log_pending WHERE type = $1 AND record_id = $2
UNION ALL SELECT idx, body FROM log_entries WHERE type = $1 AND record_id = $2`, string(typ), id).Scan(&e.Index, &e.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return e, dotlab.Errorf(dotlab.ENOTFOUND, "no log entry for %s %s", typ, id)
	}
	e.Pending = e.Index < 0
	return e, err
}

// ClaimEntries returns the entries of claimID's records with an index below
// size, in log order (none for an unknown claim).
func (l *Log) ClaimEntries(ctx context.Context, claimID string, size int64) ([]Entry, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT idx, type, record_id, body FROM log_entries WHERE claim_id = $1 AND idx < $2 ORDER BY idx`, claimID, size)
	if err != nil {
		return nil, err
	}
	return scanEntries(rows)
}

// ClaimEntriesPage is ClaimEntries from log index from on, at most limit
// entries (the log_entries_claim index keeps it one range scan).
func (l *Log) ClaimEntriesPage(ctx context.Context, claimID string, size, from int64, limit int) ([]Entry, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT idx, type, record_id, body FROM log_entries WHERE claim_id = $1 AND idx >= $2 AND idx < $3 ORDER BY idx LIMIT $4`,
		claimID, from, size, limit)
	if err != nil {
		return nil, err
	}
	return scanEntries(rows)
}

// InclusionProofs returns the RFC 6962 inclusion proofs of entries
// indexes in the tree of size size (each index < size ≤ the current size,
// else EINVALID), reading every stored hash they need in one query: a
// first pass with a recording reader learns which (the hashes a proof
// reads depend on the index and size only), the second proves from them.
func (l *Log) InclusionProofs(ctx context.Context, indexes []int64, size int64) ([]tlog.RecordProof, error) {
	if err := l.checkSize(ctx, "tree_size", size); err != nil {
		return nil, err
	}
	need := map[int64]bool{}
	record := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
		for _, x := range xs {
			need[x] = true
		}
		return make([]tlog.Hash, len(xs)), nil
	})
	for _, i := range indexes {
		if i < 0 || i >= size {
			return nil, dotlab.Errorf(dotlab.EINVALID, "entry %d is not in the tree of size %d", i, size)
		}
		if _, err := tlog.ProveRecord(size, i, record); err != nil {
			return nil, err
		}
	}
	xs := make([]int64, 0, len(need))
	for x := range need {
		xs = append(xs, x)
	}
	hs, err := hashReader{ctx, l.r}.ReadHashes(xs)
	if err != nil {
		return nil, err
	}
	have := make(map[int64]tlog.Hash, len(xs))
	for i, x := range xs {
		have[x] = hs[i]
	}
	mem := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(xs))
		for i, x := range xs {
			out[i] = have[x]
		}
		return out, nil
	})
	out := make([]tlog.RecordProof, len(indexes))
	for k, i := range indexes {
		if out[k], err = tlog.ProveRecord(size, i, mem); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkSize returns EINVALID unless 0 < size ≤ the current tree size.
func (l *Log) checkSize(ctx context.Context, name string, size int64) error {
	cur, err := l.Size(ctx)
	if err != nil {
		return err
	}
	if size < 1 || size > cur {
		return dotlab.Errorf(dotlab.EINVALID, "%s %d: must be a tree size from 1 to the current %d", name, size, cur)
	}
	return nil
}

// InclusionProof returns the RFC 6962 inclusion proof of entry index in the
// tree of size size (index < size ≤ the current size, else EINVALID).
func (l *Log) InclusionProof(ctx context.Context, index, size int64) (tlog.RecordProof, error) {
	if err := l.checkSize(ctx, "tree_size", size); err != nil {
		return nil, err
	}
	if index < 0 || index >= size {
		return nil, dotlab.Errorf(dotlab.EINVALID, "entry %d is not in the tree of size %d", index, size)
	}
	return tlog.ProveRecord(size, index, hashReader{ctx, l.r})
}

// ConsistencyProof returns the RFC 6962 consistency proof from the tree of
// size from to the tree of size to (0 < from ≤ to ≤ the current size, else
// EINVALID).
func (l *Log) ConsistencyProof(ctx context.Context, from, to int64) (tlog.TreeProof, error) {
	if err := l.checkSize(ctx, "to", to); err != nil {
		return nil, err
	}
	if from < 1 || from > to {
		return nil, dotlab.Errorf(dotlab.EINVALID, "from %d: must be a tree size from 1 to %d (to)", from, to)
	}
	return tlog.ProveTree(to, from, hashReader{ctx, l.r})
}

// TreeHash returns the root hash of the tree of size size (≤ the current
// size).
func (l *Log) TreeHash(ctx context.Context, size int64) (tlog.Hash, error) {
	if size == 0 {
		return tlog.TreeHash(0, nil)
	}
	if err := l.checkSize(ctx, "tree_size", size); err != nil {
		return tlog.Hash{}, err
	}
	return tlog.TreeHash(size, hashReader{ctx, l.r})
}

// scanEntries reads rows of (idx, type, record_id, body) as entries and
// closes rows.
func scanEntries(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var typ string
		if err := rows.Scan(&e.Index, &typ, &e.ID, &e.Data); err != nil {
			return nil, err
		}
		e.Type = tlogfmt.EntryType(typ)
		out = append(out, e)
	}
	return out, rows.Err()
}
