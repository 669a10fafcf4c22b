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
)

// Cache is a content-addressed file cache: DIR/sha256/<hex> holds exactly the
// bytes whose SHA-256 is <hex> (files are renamed in only after the hash
// matched, and are read-only). DIR/tmp holds downloads in progress.
type Cache struct {
	dir string
	// boot is this boot's id (/proc/sys/kernel/random/boot_id), stamped on
	// every blob stored; empty when unknown (no blob is then reused, see
	// Cache.reusable).
	boot string
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
	return &Cache{dir: dir, boot: bootID()}, nil
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
// how many, whether the cache already had them (CacheHit: a blob with that
// hash stored during this boot, see Cache.reusable; the download was hashed
// and not written again), and the cache path when the hash matched what was
// wanted (empty otherwise: a mismatching download is not kept).
type Fetched struct {
	SHA256   string
	Bytes    int64
	CacheHit bool
	Path     string
	// FromArchive: the host could not be fetched and these bytes came
	// from the server's input archive, verified against the pin
	// (runner/archive.go).
	FromArchive bool
}

// fetcher downloads into a Cache under a Policy.
type fetcher struct {
	cache    *Cache
	policy   Policy
	client   *http.Client
	progress func(name string, done, total int64)
	// archive, when set, is where an input whose host is gone is read
	// from (fromArchive); trail records what was verified and from where.
	archive InputArchive
	trail   *inputTrail
}

// fetch gets rawURL into the cache, hashing while it streams (one pass over
// the bytes: the download is never read back). want is the expected sha256
// hex. Transient
// failures (network, 5xx, truncation) are retried up to 3 attempts.
//
// Only when the host cannot be fetched (hostGone) and an input archive is
// set are the pinned bytes read from the archive instead, verified the
// same way; bytes the host serves that differ from the pin are returned
// as they are (input_mismatch), never replaced from the archive.
func (f *fetcher) fetch(ctx context.Context, what, rawURL, want string) (Fetched, error) {
	got, err := f.fetchURL(ctx, what, rawURL, want)
	switch {
	case err == nil:
		if got.SHA256 == want && f.trail != nil {
			f.trail.verified = append(f.trail.verified, verifiedInput{what: what, sha256: want, path: got.Path, bytes: got.Bytes})
		}
		return got, nil
	case f.archive != nil && hostGone(err):
		return f.fromArchive(ctx, what, rawURL, want, err)
	}
	return got, err
}

// fetchURL is fetch from rawURL alone.
func (f *fetcher) fetchURL(ctx context.Context, what, rawURL, want string) (Fetched, error) {
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
// and renames it into the cache when its sha256 is want. When the cache
// already holds a blob with that hash that may stand for these bytes
// (Cache.reusable), the body is hashed without being written anywhere and,
// when it matches, the cached blob is the result (Fetched.CacheHit): the
// same bytes are not written to disk a second time.
func (f *fetcher) receive(ctx context.Context, what string, body io.Reader, total int64, want string) (Fetched, error) {
	if total > f.policy.maxBytes() {
		return Fetched{}, fmt.Errorf("%s: %w: %d bytes, the limit is %d", what, ErrTooLarge, total, f.policy.maxBytes())
	}
	limited := &io.LimitedReader{R: body, N: f.policy.maxBytes() + 1}
	if held := f.cache.reusable(want, total); held != nil {
		defer held.Close()
		return f.receiveOver(ctx, what, limited, total, want, held)
	}
	tmp, err := os.CreateTemp(filepath.Join(f.cache.dir, "tmp"), "fetch-*")
	if err != nil {
		return Fetched{}, err
	}
	defer os.Remove(tmp.Name())
	got, n, err := hashCopy(ctx, tmp, limited, f.report(what, total))
	if err == nil {
		f.cache.stamp(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err := f.received(what, err, n, total); err != nil {
		return Fetched{}, err
	}
	res := Fetched{SHA256: got, Bytes: n}
	if got != want {
		return res, nil
	}
	if err := sealBlob(tmp.Name()); err != nil {
		return Fetched{}, err
	}
	dst := f.cache.Path(got)
	// Renamed over a blob already at dst (one not reusable: stored in an
	// earlier boot), atomically, so that a concurrent run's path to it
	// stays valid. (On ext4 the rename then starts writing the new file
	// back at once, auto_da_alloc: most of a second for 1 GiB, once a boot.)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return Fetched{}, err
	}
	res.Path = dst
	return res, nil
}

// received turns how a transfer of n bytes (total announced, -1 when not)
// ended into the fetch's error: truncation, the byte limit, or err itself.
func (f *fetcher) received(what string, err error, n, total int64) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: %w after %d of %d bytes", what, ErrTruncated, n, total)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case n > f.policy.maxBytes():
		return fmt.Errorf("%s: %w: more than %d bytes", what, ErrTooLarge, f.policy.maxBytes())
	case total >= 0 && n != total:
		return fmt.Errorf("%s: %w after %d of %d bytes", what, ErrTruncated, n, total)
	}
	return nil
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

// copyBufSize is the unit handed between the reading and hashing
// goroutines, and copyBufs how many may be in flight (2 MiB; made as needed). Small units stay
// in the CPU's caches between the socket read, the file write and the hash:
// measured on loopback, 1 GiB into the cache took 2-3x as long with 4
// buffers of 1 MiB as with 32 of 64 KiB, in each of four interleaved rounds
// (bench/README.md "Downloads").
const (
	copyBufSize = 64 << 10
	copyBufs    = 32
)

// hashCopy copies r to w and returns the sha256 hex of the bytes and their
// count. Reading and writing run on one goroutine and hashing on another,
// over a ring of buffers, so on two or more cores the hash costs no extra
// wall time beyond its own throughput; every byte is read exactly once.
func hashCopy(ctx context.Context, w io.Writer, r io.Reader, progress func(int64)) (string, int64, error) {
	return hashCopyBufs(ctx, w, r, progress, copyBufSize, copyBufs)
}

// hashCopyBufs is hashCopy over up to nbuf buffers of size bytes. A buffer
// is allocated only when every one made so far is in flight, so a small
// input (a 4-byte dataset) costs one buffer, not the whole ring (2 MiB, which
// alone set off a garbage collection in every trivial rerun).
func hashCopyBufs(ctx context.Context, w io.Writer, r io.Reader, progress func(int64), size, nbuf int) (string, int64, error) {
	free := make(chan []byte, nbuf)
	made := 0
	next := func() []byte {
		select {
		case b := <-free:
			return b
		default:
		}
		if made < nbuf {
			made++
			return make([]byte, size)
		}
		return <-free
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
		buf := next()
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

// sha256Hex is the lowercase hex SHA-256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
