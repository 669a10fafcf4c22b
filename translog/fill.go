package translog

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Fill writes n entries, entry(0) … entry(n-1), into an empty log in one
// transaction, computing the tree in memory: what benchmarks use to build a
// large log quickly, and what the tamper tests use to rebuild a log from
// scratch (docs/verification.md "What verification catches"). It fails
// when the log is not empty. Record writes use Append.
func (l *Log) Fill(ctx context.Context, n int64, entry func(i int64) (tlogfmt.Entry, error)) error {
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var size int64
	if err := tx.QueryRowContext(ctx, `SELECT size FROM log_head WHERE id = 1`).Scan(&size); err != nil {
		return err
	}
	if size != 0 {
		return fmt.Errorf("log: Fill needs an empty log; this one holds %d entries", size)
	}
	var stored []tlog.Hash
	mem := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	ins, err := tx.PrepareContext(ctx, `INSERT INTO log_entries (idx, type, claim_id, record_id, body, hashes) VALUES ($1, $2, $3, $4, $5, $6)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for i := int64(0); i < n; i++ {
		e, err := entry(i)
		if err != nil {
			return err
		}
		data, err := e.Encode()
		if err != nil {
			return err
		}
		hs, err := tlog.StoredHashes(i, data, mem)
		if err != nil {
			return err
		}
		stored = append(stored, hs...)
		packed := make([]byte, 0, len(hs)*tlog.HashSize)
		for _, h := range hs {
			packed = append(packed, h[:]...)
		}
		if _, err := ins.ExecContext(ctx, i, string(e.Type), e.ClaimID, e.ID, data, packed); err != nil {
			return err
		}
	}
	root, err := tlog.TreeHash(n, mem)
	if err != nil {
		return err
	}
	cp := tlogfmt.Checkpoint{Origin: l.Origin(), Size: n, Root: root}
	signed, err := note.Sign(&note.Note{Text: cp.Text()}, l.signer)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, setHeadSQL, n, string(signed)); err != nil {
		return err
	}
	return tx.Commit()
}
