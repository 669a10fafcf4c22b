// Package inputarchive keeps the server's content-addressed input archive
// (docs/protocol.md "Input archive"): blobs by SHA-256, each accepted only
// when the bytes streamed in hash to the name they are put under.
//
// Blobs live in a Bucket. Dir is the on-disk one (`dotlab serve
// --archive-dir`); the interface is the small subset of gocloud.dev/blob's
// Bucket the archive needs (a reader, an atomic writer, attributes), so an
// object store can stand behind it later through that library without
// changing the archive.
package inputarchive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab/internal/lazyre"
)

// Errors of Put and Open.
var (
	// ErrMismatch: the bytes did not hash to the name; nothing was kept.
	ErrMismatch = errors.New("the bytes do not hash to the sha256 they were put under")
	// ErrTooLarge: the body was over the byte limit; nothing was kept.
	ErrTooLarge = errors.New("the blob is over the size limit")
	// ErrNotFound: no blob with that SHA-256.
	ErrNotFound = errors.New("no such blob")
)

var hexRE = lazyre.New(`^[0-9a-f]{64}$`)

// ValidSHA256 reports whether s is 64 lowercase hex digits.
func ValidSHA256(s string) bool { return hexRE().MatchString(s) }

// Bucket stores blobs by key ("sha256/<hex>").
type Bucket interface {
	// Size is the size in bytes of the blob at key; found false when none.
	Size(ctx context.Context, key string) (size int64, found bool, err error)
	// NewReader opens the blob at key (ErrNotFound when none).
	NewReader(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// NewWriter starts a blob at key, visible only after Commit, never
	// half-written; Abort drops it.
	NewWriter(ctx context.Context, key string) (Writer, error)
}

// Writer is a blob being written.
type Writer interface {
	io.Writer
	Commit() error
	Abort()
}

// Archive is the content-addressed archive over a Bucket.
type Archive struct{ b Bucket }

// New returns the archive over b.
func New(b Bucket) *Archive { return &Archive{b: b} }

func key(sum string) string { return "sha256/" + sum }

// Size is the size of the blob sum (found false: none).
func (a *Archive) Size(ctx context.Context, sum string) (int64, bool, error) {
	if !ValidSHA256(sum) {
		return 0, false, nil
	}
	return a.b.Size(ctx, key(sum))
}

// Open reads the blob sum: its bytes and size (ErrNotFound when none). The
// bytes are what the bucket holds: a reader verifies them by their hash
// (the runner does, like any download).
func (a *Archive) Open(ctx context.Context, sum string) (io.ReadCloser, int64, error) {
	if !ValidSHA256(sum) {
		return nil, 0, ErrNotFound
	}
	return a.b.NewReader(ctx, key(sum))
}

// Put streams body into the blob sum, hashing it on the way, and keeps it
// only when the bytes hash to sum and are at most max bytes: ErrMismatch
// or ErrTooLarge otherwise, with nothing kept. It returns the byte count.
func (a *Archive) Put(ctx context.Context, sum string, body io.Reader, max int64) (int64, error) {
	if !ValidSHA256(sum) {
		return 0, ErrMismatch
	}
	w, err := a.b.NewWriter(ctx, key(sum))
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(body, max+1))
	switch {
	case err != nil:
		w.Abort()
		return n, err
	case n > max:
		w.Abort()
		return n, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	case hex.EncodeToString(h.Sum(nil)) != sum:
		w.Abort()
		return n, ErrMismatch
	}
	return n, w.Commit()
}

// Dir is a Bucket in a directory: DIR/<key> (DIR/sha256/<hex>), each blob
// written to DIR/tmp first and renamed in once whole, mode 0444 in 0700
// directories.
type Dir struct{ root string }

// MaxPutTime is longer than any upload may last (the HTTP edge gives one
// at most two hours): a temp file older than that belongs to a writer that
// died (a killed server) and OpenDir removes it.
const MaxPutTime = 3 * time.Hour

// OpenDir opens (creating) the bucket in dir, removing temp files older
// than MaxPutTime (by their modification time, on the wall clock the file
// system uses); younger ones may be another server's uploads in flight.
func OpenDir(dir string) (*Dir, error) {
	for _, d := range []string{filepath.Join(dir, "sha256"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	stale, _ := filepath.Glob(filepath.Join(dir, "tmp", "put-*"))
	for _, p := range stale {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > MaxPutTime {
			os.Remove(p)
		}
	}
	return &Dir{root: dir}, nil
}

func (d *Dir) path(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }

// Size is Bucket.Size.
func (d *Dir) Size(_ context.Context, key string) (int64, bool, error) {
	fi, err := os.Lstat(d.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if !fi.Mode().IsRegular() {
		return 0, false, fmt.Errorf("archive blob %s is not a regular file", key)
	}
	return fi.Size(), true, nil
}

// NewReader is Bucket.NewReader.
func (d *Dir) NewReader(_ context.Context, key string) (io.ReadCloser, int64, error) {
	f, err := os.Open(d.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("archive blob %s is not a regular file", key)
	}
	return f, fi.Size(), nil
}

// NewWriter is Bucket.NewWriter.
func (d *Dir) NewWriter(_ context.Context, key string) (Writer, error) {
	f, err := os.CreateTemp(filepath.Join(d.root, "tmp"), "put-*")
	if err != nil {
		return nil, err
	}
	return &dirWriter{f: f, dst: d.path(key)}, nil
}

type dirWriter struct {
	f   *os.File
	dst string
}

func (w *dirWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (w *dirWriter) Abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

func (w *dirWriter) Commit() error {
	err := w.f.Sync()
	if err == nil {
		err = w.f.Chmod(0o444)
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.dst)
	}
	if err != nil {
		os.Remove(w.f.Name())
	}
	return err
}
