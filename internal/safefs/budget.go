package safefs

import (
	"errors"
	"fmt"
	"io"
)

// ErrOverBudget marks an untrusted tree (a code archive, a git tree, an OCI
// archive) that is larger than its Budget allows: a decompression or tree
// bomb is refused, not unpacked until the disk is full.
var ErrOverBudget = errors.New("tree over its unpack limits")

// Limits bound one untrusted tree. A zero field means no limit of that kind
// (callers pass the documented defaults, e.g. runner.CodeLimits).
type Limits struct {
	// MaxEntries bounds the entries (files, directories, links) of the tree.
	MaxEntries int64
	// MaxBytes bounds the sum of regular-file sizes, in bytes.
	MaxBytes int64
	// MaxFileBytes bounds one regular file, in bytes.
	MaxFileBytes int64
	// MaxRatio bounds uncompressed bytes ÷ compressed bytes read, checked
	// once RatioAfter uncompressed bytes have been counted (see Budget.Ratio).
	MaxRatio   int64
	RatioAfter int64
}

// Budget counts what one tree has used against its Limits. It is not safe
// for concurrent use.
type Budget struct {
	Limits
	entries, bytes int64
	// Compressed, when set, reports the compressed bytes consumed so far
	// (a counting reader under the decompressor), for the ratio check.
	Compressed func() int64
}

// NewBudget starts counting against l.
func NewBudget(l Limits) *Budget { return &Budget{Limits: l} }

// Entry counts one entry named name.
func (b *Budget) Entry(name string) error {
	b.entries++
	if b.MaxEntries > 0 && b.entries > b.MaxEntries {
		return fmt.Errorf("%w: more than %d entries (at %s)", ErrOverBudget, b.MaxEntries, name)
	}
	return nil
}

// File checks a regular file's declared size before it is written.
func (b *Budget) File(name string, size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: %s declares a negative size", ErrOverBudget, name)
	}
	if b.MaxFileBytes > 0 && size > b.MaxFileBytes {
		return fmt.Errorf("%w: %s is %d bytes, over the %d-byte file limit", ErrOverBudget, name, size, b.MaxFileBytes)
	}
	if b.MaxBytes > 0 && b.bytes+size > b.MaxBytes {
		return fmt.Errorf("%w: more than %d bytes of files (at %s)", ErrOverBudget, b.MaxBytes, name)
	}
	return nil
}

// Reader wraps the body of a file declared as size bytes: it counts what is
// read against MaxBytes and the ratio, and fails if the body is longer than
// declared (a zip entry's header can lie).
func (b *Budget) Reader(name string, size int64, r io.Reader) io.Reader {
	return &budgetReader{b: b, name: name, left: size, r: r}
}

// Ratio checks uncompressed ÷ compressed bytes so far.
func (b *Budget) Ratio() error {
	if b.MaxRatio <= 0 || b.Compressed == nil || b.bytes < b.RatioAfter {
		return nil
	}
	c := b.Compressed()
	if c <= 0 || b.bytes/c > b.MaxRatio {
		return fmt.Errorf("%w: %d bytes unpacked from %d compressed, over the %d:1 compression-ratio limit", ErrOverBudget, b.bytes, c, b.MaxRatio)
	}
	return nil
}

type budgetReader struct {
	b    *Budget
	name string
	left int64
	r    io.Reader
}

func (br *budgetReader) Read(p []byte) (int, error) {
	if int64(len(p)) > br.left+1 {
		p = p[:br.left+1]
	}
	n, err := br.r.Read(p)
	if int64(n) > br.left {
		return 0, fmt.Errorf("%w: %s is longer than its declared size", ErrOverBudget, br.name)
	}
	br.left -= int64(n)
	br.b.bytes += int64(n)
	if br.b.MaxBytes > 0 && br.b.bytes > br.b.MaxBytes {
		return n, fmt.Errorf("%w: more than %d bytes of files (at %s)", ErrOverBudget, br.b.MaxBytes, br.name)
	}
	if rerr := br.b.Ratio(); rerr != nil {
		return n, rerr
	}
	return n, err
}

// CountingReader counts the bytes read through it (the compressed side of a
// ratio check).
type CountingReader struct {
	R io.Reader
	N int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}
