// Package safefs writes untrusted trees (image layers, code archives, OCI
// archives, analysis outputs) through an os.Root, so that no entry name,
// symlink or hard link can make a write land outside the chosen directory
// (docs/sandbox.md "Layer entries" and "Unpacking untrusted trees: code
// archives and git trees").
package safefs

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
)

// CleanName turns an archive entry name into a clean relative path ("" for
// the root itself): leading slashes and ".." that would climb above the root
// are dropped.
func CleanName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// CreateFrom creates name in root (it must not exist; O_EXCL, so an existing
// symlink is never followed), copies r into it and closes it. It returns the
// number of bytes written.
func CreateFrom(root *os.Root, name string, perm os.FileMode, r io.Reader) (int64, error) {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// TarOptions say which entries ExtractTar keeps.
type TarOptions struct {
	// Symlinks keeps symbolic links (as links; never followed here).
	Symlinks bool
	// Strict makes any other entry type (hard links, devices, FIFOs) an
	// error instead of skipping it.
	Strict bool
	// NoThroughLinks refuses entries whose parent path goes through a
	// symbolic link (NoSymlinkParents), as a code checkout must.
	NoThroughLinks bool
	// Budget, when set, bounds entries, bytes, file sizes and (with
	// Budget.Compressed) the compression ratio.
	Budget *Budget
}

// ExtractTar writes a tar stream under root: directories (0755), regular
// files (0755 when the entry has an execute bit, else 0644) and, with
// opts.Symlinks, symbolic links. File contents are written with
// CreateSparseFrom, so the holes of a sparse entry (and any zero run)
// allocate no disk. Names are checked with StrictName (after
// PAX and GNU long-name records): a name with `..`, an empty component or a
// NUL byte is refused (ErrUnsafeName), never cleaned; an entry over the
// budget is refused with ErrOverBudget.
func ExtractTar(root *os.Root, r io.Reader, opts TarOptions) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name, err := StrictName(h.Name, h.Typeflag == tar.TypeDir)
		if err != nil {
			return err
		}
		if name == "" {
			if h.Typeflag != tar.TypeDir {
				return fmt.Errorf("%w: a %q entry names the root directory itself (rule: only a directory entry may)", ErrUnsafeName, h.Typeflag)
			}
			continue
		}
		if b := opts.Budget; b != nil {
			if err := b.Entry(name); err != nil {
				return err
			}
			if h.Typeflag == tar.TypeReg {
				if err := b.File(name, h.Size); err != nil {
					return err
				}
			}
		}
		if opts.NoThroughLinks {
			if err := NoSymlinkParents(root, name); err != nil {
				return err
			}
		}
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case h.Typeflag == tar.TypeDir:
			err = root.MkdirAll(name, 0o755)
		case h.Typeflag == tar.TypeReg:
			var body io.Reader = tr
			if opts.Budget != nil {
				body = opts.Budget.Reader(name, h.Size, tr)
			}
			_, err = CreateSparseFrom(root, name, FileMode(h.Mode&0o111 != 0), body)
		case h.Typeflag == tar.TypeSymlink && opts.Symlinks:
			if h.Linkname == "" || strings.IndexByte(h.Linkname, 0) >= 0 || len(h.Linkname) > MaxNameBytes {
				return fmt.Errorf("%w: symbolic link %s has an empty, NUL-bearing or over-long target", ErrUnsafeName, name)
			}
			err = root.Symlink(h.Linkname, name)
		case opts.Strict:
			err = fmt.Errorf("entry type %q is not allowed here", h.Typeflag)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}

// FileMode is 0755 for an executable file, else 0644.
func FileMode(executable bool) os.FileMode {
	if executable {
		return 0o755
	}
	return 0o644
}

// NoSymlinkParents returns an error if any directory on the way to name
// (not name itself) is a symbolic link in root: a checkout must not write
// through a link, even one that stays inside the tree (git refuses the same).
func NoSymlinkParents(root *os.Root, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	p := ""
	for _, part := range strings.Split(dir, "/") {
		p = path.Join(p, part)
		fi, err := root.Lstat(p)
		if err != nil {
			return nil // not there yet: it will be created as a directory
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s: writes through the symbolic link %s", name, p)
		}
	}
	return nil
}

// ReadProblem says why ReadNoFollow refused a file; Error is one phrase for
// a note ("does not exist", "is a symbolic link", …).
type ReadProblem struct{ Phrase string }

func (e *ReadProblem) Error() string { return e.Phrase }

// ReadNoFollow reads the regular file name (a clean relative path) of root
// without following any symbolic link on the way (each directory is
// checked with Lstat, the file is opened with O_NOFOLLOW and O_NONBLOCK),
// at most max bytes. A missing file, a symlink anywhere on the path, a file
// that is not regular and one over max bytes are *ReadProblem errors.
func ReadNoFollow(root *os.Root, name string, max int64) ([]byte, error) {
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(p)
		switch {
		case os.IsNotExist(err):
			return nil, &ReadProblem{"does not exist"}
		case err != nil:
			return nil, &ReadProblem{"cannot be read: " + err.Error()}
		case fi.Mode()&os.ModeSymlink != 0 && i == len(parts)-1:
			return nil, &ReadProblem{"is a symbolic link (not followed)"}
		case fi.Mode()&os.ModeSymlink != 0:
			return nil, &ReadProblem{"is reached through the symbolic link " + p + " (not followed)"}
		case i < len(parts)-1 && !fi.IsDir():
			return nil, &ReadProblem{"does not exist (" + p + " is a " + FileKind(fi.Mode()) + ")"}
		case i == len(parts)-1 && !fi.Mode().IsRegular():
			return nil, &ReadProblem{"is a " + FileKind(fi.Mode()) + ", not a regular file"}
		case i == len(parts)-1 && fi.Size() > max:
			return nil, &ReadProblem{fmt.Sprintf("is %d bytes, over the %d-byte bound", fi.Size(), max)}
		}
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &ReadProblem{"cannot be opened: " + err.Error()}
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, &ReadProblem{"is not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &ReadProblem{"cannot be read: " + err.Error()}
	}
	if int64(len(data)) > max {
		return nil, &ReadProblem{fmt.Sprintf("is over the %d-byte bound", max)}
	}
	return data, nil
}
