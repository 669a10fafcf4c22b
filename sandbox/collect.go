package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// collectOut walks the out tmpfs without following anything (Lstat only),
// records symlinks and other non-regular entries as rejected, and copies each
// regular file into dst, hashing it in the same pass. Files are opened
// through an os.Root with O_NOFOLLOW; the container is gone by now, so the
// tree can no longer change under the walk.
func collectOut(src, dst string, res *Result) error {
	var st unix.Statfs_t
	if err := unix.Statfs(src, &st); err == nil {
		res.OutputFull = st.Bavail == 0 || st.Ffree == 0
	}
	sroot, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer sroot.Close()
	droot, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("out directory: %w", err)
	}
	defer droot.Close()
	var walk func(dir string) error
	walk = func(dir string) error {
		f, err := sroot.OpenFile(dir, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
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
			p := path.Join(dir, n)
			fi, err := sroot.Lstat(p)
			if err != nil {
				return err
			}
			switch {
			case fi.Mode().IsDir():
				if err := droot.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
				if err := walk(p); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				of, err := copyHash(sroot, droot, p)
				if err != nil {
					return err
				}
				res.Files = append(res.Files, of)
			default:
				res.Rejected = append(res.Rejected, Rejected{Path: p, Type: typeName(fi.Mode())})
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return fmt.Errorf("sandbox: collect outputs: %w", err)
	}
	sort.Slice(res.Files, func(i, j int) bool { return res.Files[i].Path < res.Files[j].Path })
	return nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return m.Type().String()
}

func copyHash(src, dst *os.Root, p string) (OutFile, error) {
	in, err := src.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return OutFile{}, err
	}
	defer in.Close()
	out, err := dst.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return OutFile{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return OutFile{}, err
	}
	return OutFile{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
