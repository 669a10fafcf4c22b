package imagestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/dotlab/dotlab/internal/safefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
	"github.com/klauspost/pgzip"
)

// MountPoints are created (empty) in every unpacked rootfs so that the
// read-only root never has to be written by the runtime: the sandbox mounts
// over them (sandbox package). An image in which one of them, or a parent of
// one, is anything but a directory is refused (checkMountPoints), never
// replaced. /tmp is made mode 1777 (a tmpfs mounted on it shows the mode of
// the directory beneath on this kernel; docs/sandbox.md "Isolation
// settings"). Parents come before their children.
var mountPoints = []string{"proc", "dev", "sys", "tmp", "work", "work/code", "work/data", "work/out"}

// mountPointRule is the rule checkMountPoints names in a refusal.
const mountPointRule = "rule: a mount point of the sandbox (/proc, /sys, /dev, /tmp, /work and their parents) must be a directory or absent in the image"

// gzipBlock and gzipAhead bound the gzip read-ahead of an unpack: at most
// gzipAhead blocks of gzipBlock uncompressed bytes wait for the tar reader.
const (
	gzipBlock = 1 << 20
	gzipAhead = 4
)

// Progress receives how many bytes of total have been processed; total is -1 when unknown.
type Progress func(done, total int64)

// RootfsPath is where the rootfs of image manifest d is (or will be) unpacked.
func (s *Store) RootfsPath(d v1.Hash) string {
	return filepath.Join(s.dir, "rootfs", d.Algorithm, d.Hex)
}

// Rootfs returns the directory holding img's root filesystem, unpacking it
// first if this digest was never unpacked (once per digest; concurrent callers
// race harmlessly: each unpacks into its own temporary directory and the first
// rename wins). Layers are applied in order through an os.Root, so no entry,
// symlink, hard link or whiteout can reach outside the rootfs; each layer's
// compressed digest and uncompressed diff_id are verified while it streams,
// and a mismatch abandons the unpack. progress (may be nil) sees compressed bytes.
//
// Before anything of an entry is applied it passes validateEntry (names and
// link targets) and the store's Limits (entries, file bytes, unpacked bytes,
// compression ratio); no entry is written through a symbolic link. A refusal
// wraps ErrUnsafeImage and names the layer digest, the entry and the rule or
// limit. Whatever the error, the temporary directory is removed: no partial
// rootfs is ever left in the cache.
//
// The tree is the image's own, with these differences: setuid/setgid bits are
// dropped, device nodes and FIFOs are skipped (the runtime provides /dev), the
// mount points listed in mountPoints exist (/tmp mode 1777), and zero runs of
// regular files (the holes of sparse entries) are holes on disk. An image whose
// final tree has a mount point (or a parent of one) that is not a directory
// is refused.
func (s *Store) Rootfs(img *Image, progress Progress) (string, error) {
	final := s.RootfsPath(img.ManifestDigest)
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	limits, err := s.Limits.effective()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".unpack-*")
	if err != nil {
		return "", err
	}
	defer RemoveTree(tmp)
	if err := s.unpackInto(tmp, img, limits, progress); err != nil {
		return "", fmt.Errorf("unpack %s: %w", img.Digest, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		if fi, serr := os.Lstat(final); serr == nil && fi.IsDir() {
			return final, nil // another process finished first
		}
		return "", err
	}
	return final, nil
}

// RemoveTree removes dir and everything below it, first making directories
// writable if a plain RemoveAll fails (an image may carry 0555 directories,
// which stop a non-root process from removing their contents).
func RemoveTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

func (s *Store) unpackInto(dir string, img *Image, limits Limits, progress Progress) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var total int64
	for _, l := range img.Manifest.Layers {
		total += l.Size
	}
	dirs, err := newDirFDs(dir)
	if err != nil {
		return err
	}
	defer dirs.close()
	u := &unpacker{root: root, dirs: dirs, limits: limits, progress: progress, total: total, links: map[string]bool{}}
	u.writers = startFileWriters()
	defer u.writers.stop()
	dirs.beforeClose = u.writers.barrier
	for i, l := range img.Manifest.Layers {
		if err := u.layer(s.blobPath(l.Digest), l, img.Config.RootFS.DiffIDs[i]); err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, l.Digest, err)
		}
	}
	if err := checkMountPoints(root); err != nil {
		return err
	}
	for _, mp := range mountPoints {
		if err := root.MkdirAll(mp, 0o755); err != nil {
			return fmt.Errorf("mount point /%s: %w", mp, err)
		}
	}
	return root.Chmod("tmp", 0o777|fs.ModeSticky)
}

// checkMountPoints refuses a tree (all layers applied) in which a path the
// sandbox mounts on, or a parent of one, is a symbolic link, a file or
// anything else but a directory. Replacing it would run the claim in a tree
// its image does not describe, and a link there is the precondition of the
// runc mount CVEs (docs/sandbox.md "Runtime CVEs and why our bundles are not
// exposed"); absent paths are created afterwards.
func checkMountPoints(root *os.Root) error {
	for _, mp := range mountPoints {
		fi, err := root.Lstat(mp)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mount point /%s: %w", mp, err)
		}
		if fi.IsDir() {
			continue
		}
		what := "a " + safefs.FileKind(fi.Mode())
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err := root.Readlink(mp); err == nil {
				what += " to " + quoteName(target)
			}
		}
		return fmt.Errorf("%w: entry %s is %s, but the sandbox mounts on /%s (%s; rebuild the image with a plain directory there)",
			ErrUnsafeImage, quoteName(mp), what, mp, mountPointRule)
	}
	return nil
}

// unpacker applies the layers of one image into root. Its counters span the
// whole image (Limits.MaxEntries and MaxUnpackedBytes are per image).
type unpacker struct {
	root     *os.Root
	limits   Limits
	progress Progress
	total    int64
	done     atomic.Int64
	bytes    int64
	entries  int64
	// ratio is the compression-ratio rule of the layer being applied, and
	// fileBytes the bytes of file contents its entries have expanded to so
	// far (sparse holes included), which ratio checks besides the stream.
	ratio     *ratioRule
	fileBytes int64
	// links holds every path of the tree that is a symbolic link. The tree
	// starts empty and only the unpacker writes it, so the set is exact; it
	// lets "never write through a symbolic link" be checked without a
	// system call per path component.
	links map[string]bool
	// dirs holds the tree's directories open for the *at system calls
	// (imagestore/unpackfs.go); buf is the one buffer file contents are
	// copied through.
	dirs *dirFDs
	buf  []byte
	// writers create small files on other goroutines (imagestore/unpackasync.go); nil: none.
	writers *fileWriters
}

// countingReader reports progress as compressed bytes are consumed.
type countingReader struct {
	r io.Reader
	u *unpacker
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	// The decompressor may read on its own goroutine (pgzip, zstd).
	done := c.u.done.Add(int64(n))
	if c.u.progress != nil && n > 0 {
		c.u.progress(done, c.u.total)
	}
	return n, err
}

// consumedReader counts the compressed bytes the decompressor has read, for
// the ratio rule; the count is read while the decompressor may be reading on
// its own goroutine (pgzip's read-ahead, zstd's stream decoder).
type consumedReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *consumedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// ratioRule is Limits.MaxCompressionRatio for one layer: a count of
// uncompressed bytes fails once it is at least after and exceeds ratio times
// the compressed bytes the decompressor has consumed. Two counts are held to
// it, each on its own (neither includes the other): the layer's tar stream
// (ratioReader) and the file contents its entries expand to (fileReader),
// which for a sparse entry are mostly holes the stream never carries.
type ratioRule struct {
	compressed *consumedReader
	ratio      int64
	after      int64
}

// check applies the rule to n bytes of what.
func (r *ratioRule) check(n int64, what string) error {
	// n/c >= ratio first, so that ratio*c cannot overflow when it is compared.
	if c := max(r.compressed.n.Load(), 1); n >= r.after && n/c >= r.ratio && n > r.ratio*c {
		return limitError("MaxCompressionRatio", r.ratio,
			fmt.Sprintf("layer expanding %d compressed bytes to %d %s (%d:1, checked after Limits.RatioCheckAfter = %d bytes)", c, n, what, n/c, r.after))
	}
	return nil
}

// ratioReader reads a layer's uncompressed stream and fails (sticky) once
// the bytes read break the layer's ratioRule.
type ratioReader struct {
	r    io.Reader
	rule *ratioRule
	n    int64
	err  error
}

func (rr *ratioReader) Read(p []byte) (int, error) {
	if rr.err != nil {
		return 0, rr.err
	}
	n, err := rr.r.Read(p)
	rr.n += int64(n)
	if rr.err = rr.rule.check(rr.n, "bytes of tar stream"); rr.err != nil {
		return n, rr.err
	}
	return n, err
}

// fileReader reads one regular file's contents from the tar reader (which
// hands out a sparse entry's holes as zeros) and holds the layer's file
// bytes to its ratioRule: a few kilobytes of sparse map declaring gigabytes
// of holes are refused once RatioCheckAfter bytes of them have been read.
type fileReader struct {
	r io.Reader
	u *unpacker
}

func (fr fileReader) Read(p []byte) (int, error) {
	n, err := fr.r.Read(p)
	fr.u.fileBytes += int64(n)
	if rerr := fr.u.ratio.check(fr.u.fileBytes, "bytes of file contents (sparse holes included)"); rerr != nil {
		return n, rerr
	}
	return n, err
}

// zstdReader turns the zstd decoder's refusal of a frame whose window is
// over the bound into a refusal naming Limits.MaxZstdWindow.
type zstdReader struct {
	r      io.Reader
	window int64
}

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	return n, zstdError(err, z.window)
}

func zstdError(err error, window int64) error {
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return limitError("MaxZstdWindow", window, fmt.Sprintf("the decoder window (history held in memory) a zstd frame of the layer asks for (%v)", err))
	}
	return err
}

// layer unpacks one layer blob, verifying its digest and diff_id.
func (u *unpacker) layer(blob string, desc v1.Descriptor, diffID v1.Hash) error {
	if !desc.MediaType.IsLayer() {
		return fmt.Errorf("%w: layer %s has media type %q, which is not a known layer type (rule: OCI or Docker tar, tar+gzip or tar+zstd layers only)", ErrUnsafeImage, desc.Digest, desc.MediaType)
	}
	f, err := os.Open(blob)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob missing from the store: %w", ErrNotFound)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	ls, err := u.openLayer(f)
	if err != nil {
		return err
	}
	defer ls.close() // on every path (idempotent)
	u.ratio, u.fileBytes = ls.ratio, 0
	diffHash := sha256.New()
	applyErr := u.applyEntries(desc, tar.NewReader(io.TeeReader(ls.plain, diffHash)))
	// Drain what follows so both digests cover every byte; a wrong blob is
	// reported as such even when it also broke the tar stream. The ratio
	// check keeps running while the uncompressed tail drains.
	if applyErr == nil {
		if _, err := io.Copy(io.Discard, io.TeeReader(ls.plain, diffHash)); err != nil {
			applyErr = streamError(desc, err)
		}
	}
	// The decompressor's goroutine (pgzip, zstd) is stopped before the
	// rest of the blob is read here: br has one reader at a time.
	ls.close()
	if _, err := io.Copy(io.Discard, ls.compressed); err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(ls.compressedHash.Sum(nil)); got != desc.Digest.String() {
		return &DigestMismatchError{What: "layer blob", Expected: desc.Digest.String(), Actual: got}
	}
	if applyErr != nil {
		return applyErr
	}
	if got := "sha256:" + hex.EncodeToString(diffHash.Sum(nil)); got != diffID.String() {
		return &DigestMismatchError{What: "layer diff_id", Expected: diffID.String(), Actual: got}
	}
	return nil
}

// layerStream is one layer blob being read: its compressed bytes (hashed and
// counted for progress as they are read) and the uncompressed stream behind
// the compression-ratio check.
type layerStream struct {
	compressed     io.Reader
	compressedHash hash.Hash
	plain          io.Reader
	ratio          *ratioRule
	close          func()
}

// openLayer sets up the streams of the layer blob f, choosing gzip, zstd or
// none by the blob's first bytes.
func (u *unpacker) openLayer(f io.Reader) (*layerStream, error) {
	ls := &layerStream{compressedHash: sha256.New(), close: func() {}}
	br := bufio.NewReaderSize(io.TeeReader(&countingReader{r: f, u: u}, ls.compressedHash), 1<<20)
	ls.compressed = br
	magic, _ := br.Peek(4)
	consumed := &consumedReader{r: br}
	var plain io.Reader
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		// klauspost/pgzip inflates (with klauspost/compress's flate, about
		// twice the standard library's speed) on its own goroutine, up to
		// gzipAhead blocks of gzipBlock uncompressed bytes ahead of the
		// files being written: decompression overlaps the system calls on
		// two cores, in bounded memory. It reads its input ahead too, which
		// the ratio rule counts as consumed: a bomb is still refused by its
		// uncompressed side (bench/README.md "First unpack").
		zr, err := pgzip.NewReaderN(consumed, gzipBlock, gzipAhead)
		if err != nil {
			return nil, err
		}
		zr.Multistream(true)
		ls.close = func() { zr.Close() }
		plain = zr
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// The decoder keeps a window of the frame's announced size in
		// memory; bound it (and the decoder's memory, which for a stream is
		// the same bound) so that a few bytes of frame header cannot make
		// the runner allocate 512 MiB, the format's maximum.
		w := uint64(u.limits.MaxZstdWindow)
		zr, err := zstd.NewReader(consumed, zstd.WithDecoderMaxWindow(w), zstd.WithDecoderMaxMemory(w))
		if err != nil {
			return nil, zstdError(err, u.limits.MaxZstdWindow)
		}
		ls.close = zr.Close
		plain = zstdReader{r: zr, window: u.limits.MaxZstdWindow}
	default:
		plain = consumed
	}
	stop := ls.close
	closed := false
	ls.close = func() { // idempotent: layer calls it before draining and on return
		if !closed {
			closed = true
			stop()
		}
	}
	ls.ratio = &ratioRule{compressed: consumed, ratio: u.limits.MaxCompressionRatio, after: u.limits.RatioCheckAfter}
	ls.plain = &ratioReader{r: plain, rule: ls.ratio}
	return ls, nil
}

// applyEntries applies every entry of the layer desc read from tr and
// returns the first failure, naming the layer and the entry.
func (u *unpacker) applyEntries(desc v1.Descriptor, tr *tar.Reader) error {
	created := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			// Every file of the layer is on disk before the next layer
			// (or the mount point check) looks at the tree.
			u.writers.barrier()
			if f := u.writers.failed(); f != nil {
				return entryError(desc, f.name, f.err)
			}
			return nil
		}
		if err != nil {
			return streamError(desc, err)
		}
		err = u.entry(tr, hdr, created)
		// A file written on a writer goroutine failed: that entry is named.
		if f := u.writers.failed(); f != nil {
			return entryError(desc, f.name, f.err)
		}
		if err != nil {
			return entryError(desc, hdr.Name, err)
		}
	}
}

// streamError classifies a failure to read a layer's stream. The blob's
// digest is checked before this error is returned (a blob that is not what
// the manifest pins is reported as a DigestMismatchError instead), so a
// stream that is not valid compressed tar is the pinned image's own: it
// refuses the image. Limit refusals pass as they are; a failure to read the
// blob file itself is the runner's.
func streamError(desc v1.Descriptor, err error) error {
	var pe *fs.PathError
	if errors.Is(err, ErrUnsafeImage) || errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%w: layer %s is not a valid tar stream (rule: a layer is a tar archive, optionally gzip or zstd compressed): %v", ErrUnsafeImage, desc.Digest, err)
}

// entry validates and applies one tar entry. created holds the paths this
// layer has written, which an opaque whiteout must keep. A ruleError (or an
// error wrapping ErrUnsafeImage) refuses the image.
func (u *unpacker) entry(tr io.Reader, hdr *tar.Header, created map[string]bool) error {
	u.entries++
	if u.entries > u.limits.MaxEntries {
		return limitError("MaxEntries", u.limits.MaxEntries, fmt.Sprintf("entry number %d", u.entries))
	}
	plan, err := validateEntry(hdr)
	if err != nil {
		return err
	}
	switch plan.kind {
	case entrySkip:
		return nil
	case entryOpaque:
		if err := u.notThroughLink(plan.path + "/x"); err != nil {
			return err
		}
		return u.opaque(plan.path, created)
	case entryWhiteout:
		if err := u.notThroughLink(plan.path); err != nil {
			return err
		}
		return u.remove(plan.path)
	}
	name := plan.path
	if err := u.notThroughLink(name); err != nil {
		return err
	}
	if err := u.countFileBytes(hdr, name); err != nil {
		return err
	}
	created[name] = true
	if ok, err := u.applyAt(tr, hdr, name); ok {
		return err
	}
	// Hard links, devices and FIFOs: through os.Root, after every file
	// being written (a link's target may be one).
	u.writers.barrier()
	if err := u.makeRoom(hdr, name); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := u.root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fsError("create the directory", err)
		}
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		if _, err := safefs.CreateSparseFrom(u.root, name, 0o600, fileReader{r: tr, u: u}); err != nil {
			return fsError("write the file", err)
		}
	case tar.TypeSymlink:
		return u.symlink(hdr, name)
	case tar.TypeLink:
		return u.hardLink(plan.link, name)
	default:
		// Character and block devices and FIFOs are not created: the
		// runtime provides /dev, and nothing else needs them.
		delete(created, name)
		return nil
	}
	return u.setMetadata(hdr, name)
}

// countFileBytes applies MaxFileBytes and MaxUnpackedBytes to a regular
// file entry, before any byte of it is written.
func (u *unpacker) countFileBytes(hdr *tar.Header, name string) error {
	if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA && hdr.Typeflag != tar.TypeGNUSparse {
		return nil
	}
	if hdr.Size > u.limits.MaxFileBytes {
		return limitError("MaxFileBytes", u.limits.MaxFileBytes, fmt.Sprintf("file %s of %d bytes", quoteName(name), hdr.Size))
	}
	if u.bytes += hdr.Size; u.bytes > u.limits.MaxUnpackedBytes {
		return limitError("MaxUnpackedBytes", u.limits.MaxUnpackedBytes, fmt.Sprintf("image unpacking to more than %d bytes of files", u.bytes))
	}
	return nil
}

// makeRoom creates the parent directories of name and removes what a lower
// entry left at name, unless both are directories.
func (u *unpacker) makeRoom(hdr *tar.Header, name string) error {
	if err := u.root.MkdirAll(rootName(path.Dir(name)), 0o755); err != nil {
		return fsError("create its parent directory", err)
	}
	if fi, err := u.root.Lstat(name); err == nil {
		if !(fi.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := u.remove(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// symlink creates the symbolic link entry hdr at name, owned as the entry says.
func (u *unpacker) symlink(hdr *tar.Header, name string) error {
	if err := u.root.Symlink(hdr.Linkname, name); err != nil {
		return fsError("create the symbolic link", err)
	}
	u.links[name] = true
	return fsError("set the link's owner", u.root.Lchown(name, hdr.Uid, hdr.Gid))
}

// hardLink creates name as a hard link to target. The target must be an
// existing non-directory inside the rootfs, reached without a symbolic link;
// the link shares its inode and metadata, so none of the entry's own is
// applied.
func (u *unpacker) hardLink(target, name string) error {
	if err := u.notThroughLink(target); err != nil {
		return err
	}
	fi, err := u.root.Lstat(target)
	switch {
	case err != nil:
		return rulef("hard link to %q, which does not exist (rule: a hard link names an earlier entry)", target)
	case fi.IsDir():
		return rulef("hard link to the directory %q (rule: hard links name files)", target)
	}
	if err := u.root.Link(target, name); err != nil {
		return fsError("create the hard link", err)
	}
	if u.links[target] {
		u.links[name] = true // a hard link to a symbolic link is one too
	}
	return nil
}

// setMetadata applies a directory's or regular file's owner, mode (setuid
// and setgid dropped, sticky kept) and, for files, times.
func (u *unpacker) setMetadata(hdr *tar.Header, name string) error {
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	if hdr.Mode&0o1000 != 0 {
		perm |= fs.ModeSticky
	}
	if err := u.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return fsError("set the owner", err)
	}
	if err := u.root.Chmod(name, perm); err != nil {
		return fsError("set the mode", err)
	}
	if hdr.Typeflag != tar.TypeDir {
		return fsError("set the times", u.root.Chtimes(name, hdr.ModTime, hdr.ModTime))
	}
	return nil
}

// notThroughLink refuses p when a directory on the way to it (not p itself)
// is a symbolic link: an entry is never written through a link, whether it
// points inside the rootfs or out of it (the classic symlink-then-file
// escape; os.Root would stop the escaping kind too, this refuses both with
// one rule).
func (u *unpacker) notThroughLink(p string) error {
	if len(u.links) == 0 {
		return nil
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && u.links[p[:i]] {
			return rulef("written through the symbolic link %q (rule: no entry is written through a symbolic link)", p[:i])
		}
	}
	return nil
}

// remove deletes p (a whole directory tree if it is one) and forgets the
// symbolic links that were at or below it. A missing p is not an error.
func (u *unpacker) remove(p string) error {
	u.writers.barrier()
	fi, err := u.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError("inspect "+p, err)
	}
	if err := u.root.RemoveAll(p); err != nil {
		return fsError("remove "+p, err)
	}
	delete(u.links, p)
	if u.dirs != nil {
		u.dirs.forget(p)
	}
	if fi.IsDir() {
		prefix := p + "/"
		for l := range u.links {
			if strings.HasPrefix(l, prefix) {
				delete(u.links, l)
			}
		}
	}
	return nil
}

// opaque removes everything in dir that lower layers put there.
func (u *unpacker) opaque(dir string, created map[string]bool) error {
	u.writers.barrier()
	rd := rootName(dir)
	if err := u.root.MkdirAll(rd, 0o755); err != nil {
		return fsError("create the opaque directory", err)
	}
	f, err := u.root.Open(rd)
	if err != nil {
		return fsError("open the opaque directory", err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fsError("list the opaque directory", err)
	}
	for _, n := range names {
		p := joinPath(dir, n)
		if created[p] {
			continue
		}
		if err := u.remove(p); err != nil {
			return err
		}
	}
	return nil
}

// fsError classifies a failed file-system operation on the private,
// initially empty rootfs tree. Resource and permission failures (disk full,
// I/O error, too many files, no privilege) are the runner's and are returned
// as they are; anything else (a parent that is a file, a name that exists, a
// path that would escape the root, a loop) can only come from the entries the
// image itself wrote, so it refuses the image as a ruleError.
func fsError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnsafeImage) {
		return err // a limit hit while the entry's bytes were read
	}
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS, syscall.EMFILE,
		syscall.ENFILE, syscall.ENOMEM, syscall.EPERM, syscall.EACCES} {
		if errors.Is(err, e) {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return rulef("cannot %s: %v (rule: every entry applies cleanly to the tree of the entries before it)", op, err)
}
