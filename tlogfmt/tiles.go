package tlogfmt

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// TileHeight is the c2sp.org/tlog-tiles tile height: a tile holds up to
// TileWidth = 2^8 hashes.
const (
	TileHeight = 8
	TileWidth  = 1 << TileHeight
)

// Tile names one c2sp.org/tlog-tiles resource: a hash tile at Level ≥ 0,
// or the entry bundle when Level is EntriesLevel; N is its index within the
// level and W its width (TileWidth for a full tile, 1-255 for a partial one).
type Tile struct {
	Level int
	N     int64
	W     int
}

// EntriesLevel marks an entry bundle.
const EntriesLevel = -1

// Path is the tile's path below the log prefix: "tile/<L>/<N>[.p/<W>]" or
// "tile/entries/<N>[.p/<W>]", with N in zero-padded 3-digit elements of
// which all but the last start with "x" (1234067 → x001/x234/067).
func (t Tile) Path() string {
	level := strconv.Itoa(t.Level)
	if t.Level == EntriesLevel {
		level = "entries"
	}
	p := "tile/" + level + "/" + indexPath(t.N)
	if t.W != TileWidth {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

func indexPath(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/", n%1000) + s
	}
	return s
}

// ParseTilePath parses Path's output (without a leading slash). It refuses
// anything Path would not write: leading zeros, a level over 63, a width
// outside 1-255 after ".p/".
func ParseTilePath(p string) (Tile, error) {
	bad := fmt.Errorf("tile path %q: want tile/<level>/<N> or tile/entries/<N>, N as x001/x234/067, optionally .p/<width 1-255>", p)
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return Tile{}, bad
	}
	level, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return Tile{}, bad
	}
	t := Tile{W: TileWidth}
	if level == "entries" {
		t.Level = EntriesLevel
	} else if l, err := strconv.Atoi(level); err == nil && l >= 0 && l <= 63 && strconv.Itoa(l) == level {
		t.Level = l
	} else {
		return Tile{}, bad
	}
	if idx, w, ok := strings.Cut(rest, ".p/"); ok {
		width, err := strconv.Atoi(w)
		if err != nil || width < 1 || width >= TileWidth || strconv.Itoa(width) != w {
			return Tile{}, bad
		}
		t.W, rest = width, idx
	}
	n, err := parseIndexPath(rest)
	if err != nil {
		return Tile{}, bad
	}
	t.N = n
	if t.Path() != p {
		return Tile{}, bad
	}
	return t, nil
}

func parseIndexPath(s string) (int64, error) {
	var n int64
	elems := strings.Split(s, "/")
	for i, e := range elems {
		if i < len(elems)-1 {
			var ok bool
			if e, ok = strings.CutPrefix(e, "x"); !ok {
				return 0, fmt.Errorf("missing x")
			}
		}
		if len(e) != 3 {
			return 0, fmt.Errorf("want 3 digits")
		}
		d, err := strconv.Atoi(e)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("not digits")
		}
		if n > (1<<62)/1000 {
			return 0, fmt.Errorf("too large")
		}
		n = n*1000 + int64(d)
	}
	return n, nil
}

// AppendBundleEntry appends one entry to an entry bundle: its length as a
// big-endian uint16, then its bytes. Entries over MaxEntryBytes panic (Encode
// never returns one).
func AppendBundleEntry(bundle, entry []byte) []byte {
	if len(entry) > MaxEntryBytes {
		panic("tlogfmt: entry over MaxEntryBytes")
	}
	bundle = binary.BigEndian.AppendUint16(bundle, uint16(len(entry)))
	return append(bundle, entry...)
}

// SplitBundle splits an entry bundle into its entries, or fails when a
// length runs past the end.
func SplitBundle(bundle []byte) ([][]byte, error) {
	var out [][]byte
	for len(bundle) > 0 {
		if len(bundle) < 2 {
			return nil, fmt.Errorf("entry bundle: truncated length after %d entries", len(out))
		}
		n := int(binary.BigEndian.Uint16(bundle))
		if len(bundle) < 2+n {
			return nil, fmt.Errorf("entry bundle: entry %d claims %d bytes, %d remain", len(out), n, len(bundle)-2)
		}
		out = append(out, bundle[2:2+n])
		bundle = bundle[2+n:]
	}
	return out, nil
}
