package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Reusing a cached blob (docs/sandbox.md "The workflow", step 1). Every
// rerun downloads every dataset again and hashes what the URL serves now;
// when the cache already holds a blob with the pinned hash, the bytes just
// received are hashed without being written, and the cached blob stands
// for them once their hash matched. That is safe only if the cached file
// still holds all the bytes it was verified with. A blob is renamed into the
// cache only after its hash matched and its file was closed, so within one
// boot of the machine its contents are complete (reads see the page cache,
// written back or not); after a crash, a file that was not yet written
// back may come back short or empty. So every blob is stamped with the id
// of the boot that stored it, and only a blob stamped with the current
// boot's id (and of the announced size) is reused; any other is downloaded
// and stored again, and stamped anew.

// bootXattr is the extended attribute holding the boot id a blob was stored in.
const bootXattr = "user.dotlab.boot"

// bootID is the kernel's id of this boot, "" when it cannot be read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(b))
	if err != nil || len(id) != 36 {
		return ""
	}
	return id
}

// stamp records this boot's id on a blob being stored. A file system
// without extended attributes leaves the blob unstamped: it is then never
// reused, only replaced.
func (c *Cache) stamp(f *os.File) {
	if c.boot != "" {
		unix.Fsetxattr(int(f.Fd()), bootXattr, []byte(c.boot), 0)
	}
}

// reusable opens the cached blob with this sha256 hex when it may stand for
// a new download of the same bytes: a regular file (not followed if a
// link), of total bytes when total is known (-1: not), stored during this
// boot. It returns nil otherwise.
func (c *Cache) reusable(hexsum string, total int64) *os.File {
	if c.boot == "" {
		return nil
	}
	f, err := os.OpenFile(c.Path(hexsum), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	fi, err := f.Stat()
	buf := make([]byte, 64)
	n, xerr := unix.Fgetxattr(int(f.Fd()), bootXattr, buf)
	if err != nil || !fi.Mode().IsRegular() || (total >= 0 && fi.Size() != total) || xerr != nil || string(buf[:n]) != c.boot {
		f.Close()
		return nil
	}
	return f
}

// receiveOver hashes body without writing it and, when its sha256 is want,
// returns held (the cached blob with that hash, opened by reusable) as the
// download. When the cached blob was removed or replaced during the
// download the attempt fails and the fetch retries it (reusing the
// replacement, or storing the bytes anew); a cached blob whose size differs
// from the bytes received is removed first.
func (f *fetcher) receiveOver(ctx context.Context, what string, body io.Reader, total int64, want string, held *os.File) (Fetched, error) {
	got, n, err := hashCopy(ctx, io.Discard, body, f.report(what, total))
	if err := f.received(what, err, n, total); err != nil {
		return Fetched{}, err
	}
	res := Fetched{SHA256: got, Bytes: n}
	if got != want {
		return res, nil
	}
	dst := f.cache.Path(want)
	fi, err := held.Stat()
	if err != nil {
		return Fetched{}, err
	}
	cur, err := os.Lstat(dst)
	if err == nil && os.SameFile(fi, cur) && fi.Size() != n {
		os.Remove(dst)
	}
	if err != nil || !os.SameFile(fi, cur) || fi.Size() != n {
		return Fetched{}, fmt.Errorf("%s: the cached copy of sha256 %s changed during the download", what, want)
	}
	if err := sealBlob(dst); err != nil {
		return Fetched{}, err
	}
	res.Path, res.CacheHit = dst, true
	return res, nil
}
