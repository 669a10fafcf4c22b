package translog

import (
	"context"
	"sort"
	"time"

	"github.com/dotlab/dotlab/tlogfmt"
)

// Cosigned is one witness's latest cosignature of the log (table
// log_cosignatures).
type Cosigned struct {
	Witness     string    // the witness's cosignature/v1 verifier key
	Size        int64     // the tree size cosigned
	Checkpoint  []byte    // the log's signed note of Size (its own signature only)
	Cosignature string    // the witness's signature line(s), each ending in "\n"
	At          time.Time // the cosignature's timestamp
}

// Cosignatures returns every witness's latest cosignature, largest tree
// size first (none when no witness ever cosigned).
func (l *Log) Cosignatures(ctx context.Context) ([]Cosigned, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT witness, size, checkpoint, cosignature, cosigned_at FROM log_cosignatures ORDER BY size DESC, witness`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Cosigned
	for rows.Next() {
		var c Cosigned
		var cp string
		var at int64
		if err := rows.Scan(&c.Witness, &c.Size, &cp, &c.Cosignature, &at); err != nil {
			return nil, err
		}
		c.Checkpoint, c.At = []byte(cp), time.Unix(at, 0).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

// keepCosignature stores c as its witness's latest cosignature unless a
// larger tree size is stored already (another server process got further).
func (l *Log) keepCosignature(ctx context.Context, c Cosigned) error {
	_, err := l.w.ExecContext(ctx, `INSERT INTO log_cosignatures (witness, size, checkpoint, cosignature, cosigned_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (witness) DO UPDATE SET size = excluded.size, checkpoint = excluded.checkpoint, cosignature = excluded.cosignature, cosigned_at = excluded.cosigned_at
WHERE excluded.size >= log_cosignatures.size`, c.Witness, c.Size, string(c.Checkpoint), c.Cosignature, c.At.Unix())
	return err
}

// Witnessed is the log's current checkpoint with the cosignatures it has,
// and the cosigned checkpoints.
type Witnessed struct {
	Checkpoint tlogfmt.Checkpoint
	// Note is the current signed checkpoint followed by the cosignature
	// lines of the witnesses that cosigned its tree size (none while they
	// have not yet), as c2sp.org/tlog-cosignature shows them: a verifier
	// that knows only the log's key ignores those lines.
	Note []byte
	// Cosigned are the checkpoints witnesses cosigned, one note per tree
	// size (the log's signature, then every cosignature of that size),
	// largest first; the first may be older than Checkpoint.
	Cosigned []string
}

// Witnessed returns the current checkpoint with its cosignatures and the
// latest cosigned checkpoints (Witnessed).
func (l *Log) Witnessed(ctx context.Context) (Witnessed, error) {
	cp, signed, err := l.Checkpoint(ctx)
	if err != nil {
		return Witnessed{}, err
	}
	all, err := l.Cosignatures(ctx)
	if err != nil {
		return Witnessed{}, err
	}
	w := Witnessed{Checkpoint: cp, Note: signed}
	bySize := map[int64][]Cosigned{}
	for _, c := range all {
		bySize[c.Size] = append(bySize[c.Size], c)
	}
	sizes := make([]int64, 0, len(bySize))
	for s := range bySize {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
	for _, s := range sizes {
		cs := bySize[s]
		var lines string
		for _, c := range cs {
			lines += c.Cosignature
		}
		w.Cosigned = append(w.Cosigned, string(cs[0].Checkpoint)+lines)
		if s == cp.Size {
			w.Note = append(append([]byte(nil), signed...), lines...)
		}
	}
	return w, nil
}
