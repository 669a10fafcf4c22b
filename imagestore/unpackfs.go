package imagestore

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/dotlab/dotlab/internal/safefs"
	"golang.org/x/sys/unix"
)

// The system calls of an unpack. Through os.Root every operation on a path
// of k components opens and closes each of its k-1 directories again
// (openat with O_NOFOLLOW, one component at a time); a rootfs of 40,000
// files at depth 5 to 8 spends most of its time there (bench/README.md
// "First unpack"). dirFDs keeps the directories of the tree open instead, so
// that a regular file costs one fstatat, one openat, its writes, fchown,
// fchmod, one utimensat and close, all relative to its parent's descriptor.
//
// The safety argument is os.Root's, held by other means: the tree starts
// empty and only the unpacker writes it; every directory is opened from its
// parent's descriptor with O_NOFOLLOW|O_DIRECTORY (a symbolic link or a file
// where a directory is wanted fails, it is never followed); every final
// component is created with O_EXCL|O_NOFOLLOW or examined with
// AT_SYMLINK_NOFOLLOW; and a removed path's descriptors (it and everything
// below it) are closed before anything else is applied (dirFDs.forget), so
// no entry is ever created in a directory that is no longer in the tree.

// maxDirFDs bounds the directory descriptors an unpack holds open; past it
// all are closed and reopened as needed.
const maxDirFDs = 2048

// dirFDs is the open directories of one rootfs tree, by path relative to
// the rootfs ("" is the rootfs itself).
type dirFDs struct {
	open map[string]*os.File
	// beforeClose, when set, runs before any descriptor is closed (the
	// file writers' barrier: no writer may be using it).
	beforeClose func()
}

func newDirFDs(rootfs string) (*dirFDs, error) {
	f, err := os.OpenFile(rootfs, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return &dirFDs{open: map[string]*os.File{"": f}}, nil
}

// get returns the open directory dir ("" or "." for the root), creating it
// and its missing parents with mode 0755 (as os.Root.MkdirAll would).
func (d *dirFDs) get(dir string) (*os.File, error) {
	if dir == "." {
		dir = ""
	}
	if f, ok := d.open[dir]; ok {
		return f, nil
	}
	if len(d.open) >= maxDirFDs {
		d.closeAllBut("")
	}
	parentName, base := path.Split(dir)
	parent, err := d.get(strings.TrimSuffix(parentName, "/"))
	if err != nil {
		return nil, err
	}
	pfd := int(parent.Fd())
	err = unix.Mkdirat(pfd, base, 0o755)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, &fs.PathError{Op: "mkdirat", Path: dir, Err: err}
	}
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	d.open[dir] = f
	return f, nil
}

// forget closes the descriptors of p and of every directory below it (p
// is being removed from the tree).
func (d *dirFDs) forget(p string) {
	if d.beforeClose != nil {
		d.beforeClose()
	}
	prefix := p + "/"
	for k, f := range d.open {
		if k != "" && (k == p || strings.HasPrefix(k, prefix)) {
			f.Close()
			delete(d.open, k)
		}
	}
}

func (d *dirFDs) closeAllBut(keep string) {
	if d.beforeClose != nil {
		d.beforeClose()
	}
	for k, f := range d.open {
		if k != keep {
			f.Close()
			delete(d.open, k)
		}
	}
}

func (d *dirFDs) close() { d.closeAllBut("\x00") }

// split is name's parent directory (opened, created if missing) and last component.
func (u *unpacker) split(name string) (*os.File, string, error) {
	dir, base := path.Split(name)
	// A parent that is a file still being written must be on disk before
	// it is opened (and found not to be a directory).
	if u.writers != nil && len(u.writers.pending) > 0 {
		for i := 0; i < len(dir); i++ {
			if dir[i] == '/' && u.writers.pending[dir[:i]] {
				u.writers.barrier()
				break
			}
		}
	}
	parent, err := u.dirs.get(strings.TrimSuffix(dir, "/"))
	return parent, base, err
}

// makeRoomAt is makeRoom on the parent's descriptor: the parent directories
// of name are created (0755) and what a lower entry left at name is removed,
// unless both are directories. It returns the parent and the last component.
func (u *unpacker) makeRoomAt(hdr *tar.Header, name string) (*os.File, string, error) {
	parent, base, err := u.split(name)
	if err != nil {
		return nil, "", fsError("create its parent directory", err)
	}
	var st unix.Stat_t
	err = unix.Fstatat(int(parent.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		// Something is there: a restated directory may be chmod-ed below
		// files still being written, or it is removed (fileWriters).
		u.writers.barrier()
	}
	if err == nil && !(st.Mode&unix.S_IFMT == unix.S_IFDIR && hdr.Typeflag == tar.TypeDir) {
		if err := u.remove(name); err != nil {
			return nil, "", err
		}
		// remove may have closed descriptors of the tree; the parent is not
		// below name, so it stayed open.
	}
	return parent, base, nil
}

// applyAt applies a directory, regular file or symbolic link entry at name
// through its parent's descriptor (see dirFDs); ok is false for the other
// types, which the caller applies through os.Root.
func (u *unpacker) applyAt(tr io.Reader, hdr *tar.Header, name string) (ok bool, err error) {
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeSymlink:
	default:
		return false, nil
	}
	if u.dirs == nil {
		return false, nil
	}
	if u.writers != nil && u.writers.pending[name] {
		u.writers.barrier()
	}
	parent, base, err := u.makeRoomAt(hdr, name)
	if err != nil {
		return true, err
	}
	pfd := int(parent.Fd())
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return true, fsError("create the directory", pathErr("mkdirat", name, err))
		}
		return true, u.dirMetadataAt(hdr, pfd, base, name)
	case tar.TypeSymlink:
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return true, fsError("create the symbolic link", pathErr("symlinkat", name, err))
		}
		u.links[name] = true
		return true, fsError("set the link's owner", pathErr("fchownat", name, unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)))
	}
	if ok, err := u.fileAsync(tr, hdr, parent, base, name); ok {
		return true, err
	}
	return true, u.fileAt(tr, hdr, pfd, base, name)
}

// fileAt creates the regular file base in the directory pfd from tr, zero
// blocks left as holes (safefs.CreateSparseFrom's rule), then sets its
// owner, mode and times as setMetadata does.
func (u *unpacker) fileAt(tr io.Reader, hdr *tar.Header, pfd int, base, name string) error {
	fd, err := unix.Openat(pfd, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fsError("write the file", pathErr("openat", name, err))
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if u.buf == nil {
		u.buf = make([]byte, 32*sparseBlock)
	}
	if err := writeSparse(f, fileReader{r: tr, u: u}, u.buf); err != nil {
		return fsError("write the file", err)
	}
	if err := f.Chown(hdr.Uid, hdr.Gid); err != nil {
		return fsError("set the owner", err)
	}
	if err := f.Chmod(entryPerm(hdr)); err != nil {
		return fsError("set the mode", err)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fsError("set the times", pathErr("utimensat", name, err))
	}
	return fsError("write the file", f.Close())
}

// dirMetadataAt sets a directory's owner and mode (setMetadata's rule; a
// directory's times are not applied).
func (u *unpacker) dirMetadataAt(hdr *tar.Header, pfd int, base, name string) error {
	if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fsError("set the owner", pathErr("fchownat", name, err))
	}
	// fchmodat follows a final symbolic link; base is the directory just
	// made or found by fstatat without following, in a tree only this
	// unpacker writes.
	if err := unix.Fchmodat(pfd, base, uint32(entryPerm(hdr)&fs.ModePerm)|stickyBit(hdr), 0); err != nil {
		return fsError("set the mode", pathErr("fchmodat", name, err))
	}
	return nil
}

func stickyBit(hdr *tar.Header) uint32 {
	if hdr.Mode&0o1000 != 0 {
		return unix.S_ISVTX
	}
	return 0
}

// entryPerm is the mode an entry gets: its permission bits and the sticky
// bit; setuid and setgid are dropped.
func entryPerm(hdr *tar.Header) fs.FileMode {
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	if hdr.Mode&0o1000 != 0 {
		perm |= fs.ModeSticky
	}
	return perm
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// sparseBlock is safefs.CreateSparseFrom's unit: aligned 4 KiB blocks of
// zeros are skipped, not written.
const sparseBlock = 4096

var zeroBlock [sparseBlock]byte

// writeSparse copies r into the empty file f as safefs.CreateSparseFrom
// does (every aligned all-zero 4 KiB block a hole, the length set by
// ftruncate only when the file ends in one), reading through buf.
func writeSparse(f *os.File, r io.Reader, buf []byte) error {
	var n, end int64 // bytes of r consumed; end of the last bytes written
	for {
		m, rerr := safefs.Fill(r, buf)
		for chunk := buf[:m]; len(chunk) > 0; {
			size := min(sparseBlock, len(chunk))
			zero := bytes.Equal(chunk[:size], zeroBlock[:size])
			run := size
			for run < len(chunk) {
				next := min(sparseBlock, len(chunk)-run)
				if bytes.Equal(chunk[run:run+next], zeroBlock[:next]) != zero {
					break
				}
				run += next
			}
			if !zero {
				if _, err := f.WriteAt(chunk[:run], n); err != nil {
					return err
				}
				end = n + int64(run)
			}
			n += int64(run)
			chunk = chunk[run:]
		}
		switch {
		case rerr == io.EOF && n > end:
			return f.Truncate(n)
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}
