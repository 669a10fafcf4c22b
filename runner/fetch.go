package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/dotlab/dotlab/internal/safefs"
	"github.com/dotlab/dotlab/sandbox"

	"golang.org/x/sys/unix"
)

// Cache is a content-addressed file cache: DIR/sha256/<hex> holds exactly the
// bytes whose SHA-256 is <hex> (files are renamed in only after the hash
// matched, and are read-only). DIR/tmp holds downloads in progress.
type Cache struct {
	dir string
}

// OpenCache opens (creating) a cache in dir.
func OpenCache(dir string) (*Cache, error) {
	for _, d := range []string{filepath.Join(dir, "sha256"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		// A cache made by an older version may be 0755: no host user but
		// the runner's reads downloads (docs/sandbox.md, cache permissions).
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	return &Cache{dir: dir}, nil
}

// sealBlob makes a verified blob read-only for its owner and readable by
// the sandbox's group only (mode 0440, group sandbox.GID): the analysis,
// which runs as sandbox.UID:sandbox.GID, reads it through /work/data, and
// no other host account can, whatever the source file's mode was (a local
// file is never widened to world-readable). Without the right to chown
// (not root: no sandbox can run anyway) the blob is 0400.
func sealBlob(name string) error {
	if err := os.Chown(name, -1, sandbox.GID); err != nil {
		return os.Chmod(name, 0o400)
	}
	return os.Chmod(name, 0o440)
}

// Path is where the blob with this sha256 hex is (or would be).
func (c *Cache) Path(hexsum string) string { return filepath.Join(c.dir, "sha256", hexsum) }

// StatusError is a non-2xx answer to a download.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: HTTP %d %s", e.URL, e.Code, http.StatusText(e.Code))
}

// Permanent reports whether the status says the file is not there to fetch
// (4xx), as opposed to a server or network trouble worth retrying.
func (e *StatusError) Permanent() bool { return e.Code >= 400 && e.Code < 500 }

// ErrTruncated marks a body that ended before its Content-Length.
var ErrTruncated = errors.New("download truncated")

// Fetched is the result of one fetch: the sha256 (hex) of the bytes received,
// how many, whether the cache already had them, and the cache path when the
// hash matched what was wanted (empty otherwise: a mismatching file is not kept).
type Fetched struct {
	SHA256   string
	Bytes    int64
	CacheHit bool
	Path     string
}

// maxPrealloc bounds the disk reserved from a server's Content-Length.
const maxPrealloc = 1 << 30

// fetcher downloads into a Cache under a Policy.
type fetcher struct {
	cache    *Cache
	policy   Policy
	client   *http.Client
	progress func(name string, done, total int64)
}

// fetch gets rawURL into the cache, hashing while it streams (one pass over
// the bytes: the download is never read back). want is the expected sha256
// hex. Transient
// failures (network, 5xx, truncation) are retried up to 3 attempts.
func (f *fetcher) fetch(ctx context.Context, what, rawURL, want string) (Fetched, error) {
	u, err := f.policy.CheckURL(what, rawURL)
	if err != nil {
		return Fetched{}, err
	}
	// Every rerun downloads from the manifest's URL, even when the cache
	// already holds bytes with the pinned hash: verifying the inputs means
	// verifying what the URL serves now (an altered or moved file must give
	// input_mismatch, not a silent cache hit). The cache only stores the
	// result by its hash.
	// The deadline is the run's fetch budget (Policy.budget, set by Rerun
	// around every download, clone and pull), shared by all attempts.
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		res, err := f.once(ctx, what, u, want)
		if err == nil {
			return res, nil
		}
		last = err
		var se *StatusError
		if errors.As(err, &se) && se.Permanent() || errors.Is(err, ErrRefused) || errors.Is(err, ErrStalled) || errors.Is(err, ErrTooLarge) || ctx.Err() != nil || u.Scheme == "file" || u.Scheme == "" {
			break
		}
	}
	return Fetched{}, last
}

func (f *fetcher) once(ctx context.Context, what string, u *url.URL, want string) (res Fetched, err error) {
	defer func() {
		// The run's fetch budget cut the transfer: say so rather than
		// "context deadline exceeded".
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrFetchBudget) {
			err = fmt.Errorf("%s: %w", what, cause)
		}
	}()
	body, total, err := f.open(ctx, what, u)
	if err != nil {
		return Fetched{}, err
	}
	defer body.Close()
	return f.receive(ctx, what, body, total, want)
}

// ErrTooLarge marks a download over the policy's byte limit (Policy.MaxBytes).
var ErrTooLarge = errors.New("download over the byte limit")

// open starts reading u: a local file inside the policy's LocalRoot, or
// an HTTP GET. total is the announced length, -1 when unknown.
func (f *fetcher) open(ctx context.Context, what string, u *url.URL) (io.ReadCloser, int64, error) {
	if u.Scheme == "file" || u.Scheme == "" {
		in, err := f.policy.openLocal(what, u)
		if err != nil {
			return nil, 0, err
		}
		total := int64(-1)
		if fi, err := in.Stat(); err == nil {
			total = fi.Size()
		}
		return in, total, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%s: %w", what, &StatusError{URL: u.Redacted(), Code: resp.StatusCode})
	}
	if resp.ContentLength > f.policy.maxBytes() {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%s: %w: %d bytes announced, the limit is %d", what, ErrTooLarge, resp.ContentLength, f.policy.maxBytes())
	}
	return resp.Body, resp.ContentLength, nil
}

// receive copies body into a temporary file of the cache while hashing it,
// and renames it into the cache when its sha256 is want.
func (f *fetcher) receive(ctx context.Context, what string, body io.Reader, total int64, want string) (Fetched, error) {
	if total > f.policy.maxBytes() {
		return Fetched{}, fmt.Errorf("%s: %w: %d bytes, the limit is %d", what, ErrTooLarge, total, f.policy.maxBytes())
	}
	tmp, err := os.CreateTemp(filepath.Join(f.cache.dir, "tmp"), "fetch-*")
	if err != nil {
		return Fetched{}, err
	}
	defer os.Remove(tmp.Name())
	limited := &io.LimitedReader{R: body, N: f.policy.maxBytes() + 1}
	var got string
	var n int64
	// With the length known and the blocks reserved (so writing through the
	// mapping cannot fail for lack of space), receive straight into a mapping
	// of the file: one copy instead of two. Otherwise copy through buffers.
	// Only modest sizes are reserved up front: a hostile Content-Length must
	// not make the runner reserve disk it will never receive.
	if total > 0 && total <= maxPrealloc && unix.Fallocate(int(tmp.Fd()), 0, 0, total) == nil {
		got, n, err = mappedHashCopy(ctx, tmp, limited, total, f.report(what, total))
	} else {
		got, n, err = hashCopy(ctx, tmp, limited, f.report(what, total))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Fetched{}, fmt.Errorf("%s: %w after %d of %d bytes", what, ErrTruncated, n, total)
	case err != nil:
		return Fetched{}, fmt.Errorf("%s: %w", what, err)
	case n > f.policy.maxBytes():
		return Fetched{}, fmt.Errorf("%s: %w: more than %d bytes", what, ErrTooLarge, f.policy.maxBytes())
	case total >= 0 && n != total:
		return Fetched{}, fmt.Errorf("%s: %w after %d of %d bytes", what, ErrTruncated, n, total)
	}
	res := Fetched{SHA256: got, Bytes: n}
	if got != want {
		return res, nil
	}
	if err := sealBlob(tmp.Name()); err != nil {
		return Fetched{}, err
	}
	dst := f.cache.Path(got)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return Fetched{}, err
	}
	res.Path = dst
	return res, nil
}

func (f *fetcher) report(what string, total int64) func(int64) {
	if f.progress == nil {
		return nil
	}
	return func(done int64) { f.progress(what, done, total) }
}

func fileExists(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// copyBufSize is the unit handed between the reading and hashing goroutines.
const copyBufSize = 1 << 20

// hashCopy copies r to w and returns the sha256 hex of the bytes and their
// count. Reading and writing run on one goroutine and hashing on another,
// over a ring of buffers, so on two or more cores the hash costs no extra
// wall time beyond its own throughput; every byte is read exactly once.
func hashCopy(ctx context.Context, w io.Writer, r io.Reader, progress func(int64)) (string, int64, error) {
	const nbuf = 4
	free := make(chan []byte, nbuf)
	for i := 0; i < nbuf; i++ {
		free <- make([]byte, copyBufSize)
	}
	full := make(chan []byte, nbuf)
	h := sha256.New()
	hashed := make(chan struct{})
	go func(h hash.Hash) {
		defer close(hashed)
		for b := range full {
			h.Write(b)
			free <- b[:cap(b)]
		}
	}(h)
	var n int64
	var err error
	discard := w == io.Discard
	for {
		if err = ctx.Err(); err != nil {
			break
		}
		buf := <-free
		m, rerr := safefs.Fill(r, buf)
		if m > 0 {
			full <- buf[:m]
			if !discard {
				if _, werr := w.Write(buf[:m]); werr != nil {
					err = werr
					break
				}
			}
			n += int64(m)
			if progress != nil {
				progress(n)
			}
		} else {
			free <- buf
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(full)
	<-hashed
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// mappedHashCopy reads exactly size bytes from r into f (already sized and
// allocated to size) through a shared memory mapping, hashing each block on
// a second goroutine as soon as it has arrived: the bytes are copied once,
// from the socket into the page cache, and hashed from there. Fewer bytes is
// io.ErrUnexpectedEOF (with the count); more is an error.
func mappedHashCopy(ctx context.Context, f *os.File, r io.Reader, size int64, progress func(int64)) (string, int64, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return "", 0, err
	}
	defer unix.Munmap(mem)
	h := sha256.New()
	blocks := make(chan []byte, 16)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for b := range blocks {
			h.Write(b)
		}
	}()
	var off int64
	var rerr error
	for off < size && rerr == nil {
		if rerr = ctx.Err(); rerr != nil {
			break
		}
		end := min(off+4*copyBufSize, size)
		var m int
		m, rerr = safefs.Fill(r, mem[off:end])
		if m > 0 {
			blocks <- mem[off : off+int64(m)]
			off += int64(m)
			if progress != nil {
				progress(off)
			}
		}
	}
	close(blocks)
	<-hashed
	if rerr == io.EOF && off < size {
		rerr = io.ErrUnexpectedEOF
	}
	if rerr != nil && rerr != io.EOF {
		return "", off, rerr
	}
	var one [1]byte
	if k, _ := r.Read(one[:]); k > 0 {
		return "", off, fmt.Errorf("more than the %d bytes announced", size)
	}
	return hex.EncodeToString(h.Sum(nil)), off, nil
}

// sha256Hex is the lowercase hex SHA-256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
