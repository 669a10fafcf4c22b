package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/dotlab/dotlab/internal/safefs"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// MaxOutputDepth bounds how deep directories in /work/out may nest
// (docs/sandbox.md "After the run"): deeper trees are refused, not walked.
const MaxOutputDepth = 32

// outEntry is one inventoried path of /work/out.
type outEntry struct {
	path string
	dir  bool
	size int64
}

// collectOut copies /work/out to the host in two passes (docs/sandbox.md
// "After the run"). The first pass inventories the tmpfs without following
// anything (Lstat only): symlinks, FIFOs, sockets and devices are recorded
// as rejected, and the apparent size of every regular file is summed. The
// tmpfs caps allocated pages only, so a sparse file (`truncate -s 1000M`)
// costs the container nothing and would cost the host its full length; the
// inventory is therefore checked against limits.OutputBytes (sum of
// apparent sizes), limits.OutputFiles (entries) and MaxOutputDepth before
// a single byte is copied. If any bound is broken, nothing is copied and
// res.OverLimit names the bound. Otherwise the second pass copies each
// regular file through os.Root with O_NOFOLLOW, at most the inventoried
// size, hashing it in the same pass. The container is gone by now, so the
// tree can no longer change under the walk.
func collectOut(src, dst string, limits Limits, res *Result) error {
	var st unix.Statfs_t
	if err := unix.Statfs(src, &st); err == nil {
		res.OutputFull = st.Bavail == 0 || st.Ffree == 0
	}
	sroot, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer sroot.Close()
	entries, over, err := inventory(sroot, limits, res)
	if err != nil {
		return fmt.Errorf("sandbox: collect outputs: %w", err)
	}
	if over != "" {
		res.OverLimit = over
		return nil
	}
	droot, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("out directory: %w", err)
	}
	defer droot.Close()
	for _, e := range entries {
		if e.dir {
			if err := droot.Mkdir(e.path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("sandbox: collect outputs: %w", err)
			}
			continue
		}
		of, err := copyHash(sroot, droot, e.path, e.size)
		if err != nil {
			return fmt.Errorf("sandbox: collect outputs: %w", err)
		}
		res.Files = append(res.Files, of)
	}
	sort.Slice(res.Files, func(i, j int) bool { return res.Files[i].Path < res.Files[j].Path })
	return nil
}

// inventory walks the tree (Lstat only, sorted) and returns its directories
// and regular files in creation order, or the first bound it breaks.
func inventory(root *os.Root, limits Limits, res *Result) ([]outEntry, string, error) {
	var entries []outEntry
	var total int64
	over := ""
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		f, err := root.OpenFile(dir, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, n := range names {
			if over != "" {
				return nil
			}
			p := path.Join(dir, n)
			fi, err := root.Lstat(p)
			if err != nil {
				return err
			}
			if int64(len(entries)+len(res.Rejected)) >= limits.OutputFiles {
				over = fmt.Sprintf("/work/out holds more than %d entries (the output file limit)", limits.OutputFiles)
				return nil
			}
			switch {
			case fi.Mode().IsDir():
				if depth+1 > MaxOutputDepth {
					over = fmt.Sprintf("/work/out nests directories deeper than %d levels (at %s)", MaxOutputDepth, p)
					return nil
				}
				entries = append(entries, outEntry{path: p, dir: true})
				if err := walk(p, depth+1); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				total += fi.Size()
				if fi.Size() > limits.OutputBytes || total > limits.OutputBytes {
					over = fmt.Sprintf("/work/out holds more than %d bytes (the output size limit, counted by apparent file size, sparse files included; at %s, %d bytes)",
						limits.OutputBytes, p, fi.Size())
					return nil
				}
				entries = append(entries, outEntry{path: p, size: fi.Size()})
			default:
				res.Rejected = append(res.Rejected, Rejected{Path: p, Type: safefs.FileKind(fi.Mode())})
			}
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return nil, "", err
	}
	return entries, over, nil
}

// copyHash copies at most size bytes of p from src to dst and hashes them;
// a file that is not exactly size bytes long now is an error (the tree must
// not change after the inventory).
func copyHash(src, dst *os.Root, p string, size int64) (OutFile, error) {
	in, err := src.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return OutFile{}, err
	}
	defer in.Close()
	out, err := dst.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return OutFile{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s changed size during copy-out (%d bytes, inventoried %d)", p, n, size)
	}
	if err != nil {
		return OutFile{}, err
	}
	return OutFile{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
