package translog

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/tlog"
)

// hashesAtLevel is how many hashes level L of the tiling holds for a tree
// of size size: the complete subtrees of 256^L entries.
func hashesAtLevel(size int64, level int) int64 {
	for i := 0; i < level && size > 0; i++ {
		size >>= tlogfmt.TileHeight
	}
	return size
}

// TileData returns the bytes of the c2sp.org/tlog-tiles resource t: a hash
// tile (W hashes of 32 bytes) or an entry bundle (W length-prefixed
// entries). It returns ENOTFOUND when the current tree does not hold the
// whole resource. Full resources are cached (they never change).
func (l *Log) TileData(ctx context.Context, t tlogfmt.Tile) ([]byte, error) {
	path := t.Path()
	if t.W == tlogfmt.TileWidth {
		if b, ok := l.tiles.Get(path); ok {
			return b, nil
		}
	}
	size, err := l.Size(ctx)
	if err != nil {
		return nil, err
	}
	have := size
	if t.Level != tlogfmt.EntriesLevel {
		have = hashesAtLevel(size, t.Level)
	}
	if t.N < 0 || t.N > have/tlogfmt.TileWidth || t.N*tlogfmt.TileWidth+int64(t.W) > have {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "%s: the log (size %d) does not hold this tile yet", path, size)
	}
	var b []byte
	if t.Level == tlogfmt.EntriesLevel {
		b, err = l.bundle(ctx, t)
	} else {
		b, err = tlog.ReadTileData(tlog.Tile{H: tlogfmt.TileHeight, L: t.Level, N: t.N, W: t.W}, hashReader{ctx, l.r})
	}
	if err != nil {
		return nil, err
	}
	if t.W == tlogfmt.TileWidth {
		l.tiles.Put(path, b, len(b))
	}
	return b, nil
}

// bundle reads the W entries of bundle N.
func (l *Log) bundle(ctx context.Context, t tlogfmt.Tile) ([]byte, error) {
	first := t.N * tlogfmt.TileWidth
	rows, err := l.r.QueryContext(ctx, `SELECT idx, body FROM log_entries WHERE idx >= $1 AND idx < $2 ORDER BY idx`, first, first+int64(t.W))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []byte
	next := first
	for rows.Next() {
		var idx int64
		var body []byte
		if err := rows.Scan(&idx, &body); err != nil {
			return nil, err
		}
		if idx != next {
			return nil, fmt.Errorf("log entry %d is missing", next)
		}
		out = tlogfmt.AppendBundleEntry(out, body)
		next++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if next != first+int64(t.W) {
		return nil, fmt.Errorf("log entry %d is missing", next)
	}
	return out, nil
}
