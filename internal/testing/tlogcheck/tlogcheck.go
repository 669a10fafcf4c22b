// Package tlogcheck is a transparency-log verifier written only against
// third-party libraries — golang.org/x/mod/sumdb/note for the checkpoint's
// signature, golang.org/x/mod/sumdb/tlog for the tiles and
// transparency-dev/merkle for the RFC 6962 proofs — reading nothing but a
// log's c2sp.org/tlog-checkpoint and c2sp.org/tlog-tiles resources over
// HTTP. It imports no DotLab package (TestImportsNoDotLabCode checks), so
// the tests that use it show that the log DotLab serves verifies without
// DotLab code (docs/verification.md).
package tlogcheck

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// tileHeight is c2sp.org/tlog-tiles' fixed height (256 hashes a tile).
const tileHeight = 8

// Tree is a log's verified state at one checkpoint: its origin, size and
// root hash, and every entry, each checked against the root.
type Tree struct {
	Origin  string
	Size    int64
	Root    tlog.Hash
	Entries [][]byte
	hashes  tlog.HashReader // authenticated by Root
}

// Fetch reads the checkpoint at prefix+"checkpoint", verifies its
// signature with the note verifier key vkey, then reads every entry bundle
// and checks each entry's RFC 6962 leaf hash against the level-0 tiles,
// which tlog authenticates against the checkpoint's root. prefix ends in
// "/", e.g. "http://127.0.0.1:8080/log/".
func Fetch(ctx context.Context, hc *http.Client, prefix, vkey string) (*Tree, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	signed, err := get(ctx, hc, prefix+"checkpoint")
	if err != nil {
		return nil, err
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("checkpoint signature: %w", err)
	}
	t, err := parseCheckpoint(n.Text)
	if err != nil {
		return nil, err
	}
	t.hashes = tlog.TileHashReader(tlog.Tree{N: t.Size, Hash: t.Root}, &tileReader{ctx: ctx, hc: hc, prefix: prefix})
	root, err := tlog.TreeHash(t.Size, t.hashes)
	if err != nil {
		return nil, fmt.Errorf("tree hash from tiles: %w", err)
	}
	if root != t.Root {
		return nil, fmt.Errorf("tiles give root %s, checkpoint says %s", root, t.Root)
	}
	if err := t.readEntries(ctx, hc, prefix); err != nil {
		return nil, err
	}
	return t, nil
}

func parseCheckpoint(text string) (*Tree, error) {
	lines := strings.Split(text, "\n")
	if len(lines) < 4 {
		return nil, fmt.Errorf("checkpoint: want origin, size and root lines, got %q", text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("checkpoint size %q: %w", lines[1], err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return nil, fmt.Errorf("checkpoint root %q is not a base64 SHA-256", lines[2])
	}
	return &Tree{Origin: lines[0], Size: size, Root: tlog.Hash(root)}, nil
}

// readEntries fetches every entry bundle and checks each entry against the
// authenticated level-0 hashes.
func (t *Tree) readEntries(ctx context.Context, hc *http.Client, prefix string) error {
	for start := int64(0); start < t.Size; start += 1 << tileHeight {
		w := min(t.Size-start, 1<<tileHeight)
		bundle, err := get(ctx, hc, prefix+c2spPath(tlog.Tile{H: tileHeight, L: -1, N: start >> tileHeight, W: int(w)}))
		if err != nil {
			return err
		}
		entries, err := splitBundle(bundle)
		if err != nil {
			return err
		}
		if int64(len(entries)) != w {
			return fmt.Errorf("entry bundle at %d holds %d entries, want %d", start, len(entries), w)
		}
		idx := make([]int64, w)
		for i := range idx {
			idx[i] = tlog.StoredHashIndex(0, start+int64(i))
		}
		leaves, err := t.hashes.ReadHashes(idx)
		if err != nil {
			return err
		}
		for i, e := range entries {
			if tlog.RecordHash(e) != leaves[i] {
				return fmt.Errorf("entry %d does not hash to the tree's leaf %d", start+int64(i), start+int64(i))
			}
		}
		t.Entries = append(t.Entries, entries...)
	}
	return nil
}

// CheckInclusion proves entry i from the tiles and verifies the proof with
// transparency-dev/merkle against the root.
func (t *Tree) CheckInclusion(i int64) error {
	p, err := tlog.ProveRecord(t.Size, i, t.hashes)
	if err != nil {
		return err
	}
	leaf := rfc6962.DefaultHasher.HashLeaf(t.Entries[i])
	return proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), uint64(t.Size), leaf, hashBytes(p), t.Root[:])
}

// CheckConsistency proves from the newer tree's tiles that old is a prefix
// of t and verifies the proof with transparency-dev/merkle: it fails when
// the log forked or rewrote history between the two checkpoints.
func (t *Tree) CheckConsistency(old *Tree) error {
	if old.Origin != t.Origin {
		return fmt.Errorf("origins differ: %q then %q", old.Origin, t.Origin)
	}
	if old.Size > t.Size {
		return fmt.Errorf("the log shrank from %d to %d entries", old.Size, t.Size)
	}
	var p tlog.TreeProof
	if old.Size > 0 && old.Size < t.Size {
		var err error
		if p, err = tlog.ProveTree(t.Size, old.Size, t.hashes); err != nil {
			return err
		}
	}
	return proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(old.Size), uint64(t.Size), hashBytes(p), old.Root[:], t.Root[:])
}

func hashBytes[H ~[tlog.HashSize]byte](hs []H) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// tileReader is a tlog.TileReader over the C2SP paths.
type tileReader struct {
	ctx    context.Context
	hc     *http.Client
	prefix string
}

func (r *tileReader) Height() int { return tileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := get(r.ctx, r.hc, r.prefix+c2spPath(t))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func (r *tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// c2spPath turns tlog's "tile/8/L/N[.p/W]" (L "data" for entries) into the
// c2sp.org/tlog-tiles path, which has no height element.
func c2spPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), "tile/"+strconv.Itoa(tileHeight)+"/")
	if rest, ok := strings.CutPrefix(p, "data/"); ok {
		return "tile/entries/" + rest
	}
	return "tile/" + p
}

func splitBundle(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			return nil, fmt.Errorf("entry bundle truncated after %d entries", len(out))
		}
		n := int(binary.BigEndian.Uint16(b))
		out = append(out, bytes.Clone(b[2:2+n]))
		b = b[2+n:]
	}
	return out, nil
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<24))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}
