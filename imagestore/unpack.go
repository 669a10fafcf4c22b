package imagestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab/internal/safefs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
)

// Limits on what one image may unpack to (a decompression bomb stops here).
const (
	maxRootfsBytes   = 64 << 30
	maxRootfsEntries = 2_000_000
)

// MountPoints are created (empty) in every unpacked rootfs so that the
// read-only root never has to be written by the runtime: the sandbox mounts
// over them (sandbox package). /tmp is made mode 1777 (a tmpfs mounted on it
// shows the mode of the directory beneath on this kernel, sandbox-facts.md).
var mountPoints = []string{"proc", "dev", "sys", "tmp", "work", "work/code", "work/data", "work/out"}

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
// The tree is the image's own, with these differences: setuid/setgid bits are
// dropped, device nodes and FIFOs are skipped (the runtime provides /dev), and
// the mount points listed in mountPoints exist (/tmp mode 1777).
func (s *Store) Rootfs(img *Image, progress Progress) (string, error) {
	final := s.RootfsPath(img.ManifestDigest)
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".unpack-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := s.unpackInto(tmp, img, progress); err != nil {
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

func (s *Store) unpackInto(dir string, img *Image, progress Progress) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var total int64
	for _, l := range img.Manifest.Layers {
		total += l.Size
	}
	u := &unpacker{root: root, progress: progress, total: total}
	for i, l := range img.Manifest.Layers {
		if err := u.layer(s.blobPath(l.Digest), l, img.Config.RootFS.DiffIDs[i]); err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, l.Digest, err)
		}
	}
	for _, mp := range mountPoints {
		fi, err := root.Lstat(mp)
		if err == nil && !fi.IsDir() {
			if err := root.RemoveAll(mp); err != nil {
				return err
			}
		}
		if err := root.MkdirAll(mp, 0o755); err != nil {
			return fmt.Errorf("mount point /%s: %w", mp, err)
		}
	}
	return root.Chmod("tmp", 0o777|fs.ModeSticky)
}

type unpacker struct {
	root     *os.Root
	progress Progress
	total    int64
	done     int64
	bytes    int64
	entries  int64
}

// countingReader reports progress as compressed bytes are consumed.
type countingReader struct {
	r io.Reader
	u *unpacker
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.u.done += int64(n)
	if c.u.progress != nil && n > 0 {
		c.u.progress(c.u.done, c.u.total)
	}
	return n, err
}

func (u *unpacker) layer(blob string, desc v1.Descriptor, diffID v1.Hash) error {
	f, err := os.Open(blob)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob missing from the store: %w", ErrNotFound)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	compressedHash := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(&countingReader{r: f, u: u}, compressedHash), 1<<20)
	magic, _ := br.Peek(4)
	var plain io.Reader
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		zr.Multistream(true)
		plain = zr
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return err
		}
		defer zr.Close()
		plain = zr
	default:
		plain = br
	}
	diffHash := sha256.New()
	tr := tar.NewReader(io.TeeReader(plain, diffHash))
	created := map[string]bool{}
	var applyErr error
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			applyErr = err
			break
		}
		if err := u.entry(tr, hdr, created); err != nil {
			applyErr = fmt.Errorf("entry %q: %w", hdr.Name, err)
			break
		}
	}
	// Drain what follows so both digests cover every byte; a wrong blob is
	// reported as such even when it also broke the tar stream.
	if applyErr == nil {
		if _, err := io.Copy(io.Discard, io.TeeReader(plain, diffHash)); err != nil {
			applyErr = err
		}
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(compressedHash.Sum(nil)); got != desc.Digest.String() {
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

// entry applies one tar entry. created holds the paths this layer has written,
// which an opaque whiteout must keep.
func (u *unpacker) entry(tr io.Reader, hdr *tar.Header, created map[string]bool) error {
	u.entries++
	if u.entries > maxRootfsEntries {
		return fmt.Errorf("image has more than %d entries", maxRootfsEntries)
	}
	name := safefs.CleanName(hdr.Name)
	if name == "" {
		return nil // the root itself
	}
	dir, base := path.Dir(name), path.Base(name)
	if base == ".wh..wh..opq" {
		return u.opaque(dir, created)
	}
	if strings.HasPrefix(base, ".wh.") {
		return u.root.RemoveAll(path.Join(dir, strings.TrimPrefix(base, ".wh.")))
	}
	if err := u.root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if fi, err := u.root.Lstat(name); err == nil {
		if !(fi.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := u.root.RemoveAll(name); err != nil {
				return err
			}
		}
	}
	created[name] = true
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	if hdr.Mode&0o1000 != 0 {
		perm |= fs.ModeSticky
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := u.root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case tar.TypeReg, tar.TypeRegA:
		u.bytes += hdr.Size
		if u.bytes > maxRootfsBytes {
			return fmt.Errorf("image unpacks to more than %d bytes", int64(maxRootfsBytes))
		}
		if _, err := safefs.CreateFrom(u.root, name, 0o600, tr); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := u.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		return u.root.Lchown(name, hdr.Uid, hdr.Gid)
	case tar.TypeLink:
		target := safefs.CleanName(hdr.Linkname)
		if target == "" {
			return errors.New("hard link to the root directory")
		}
		return u.root.Link(target, name)
	default:
		// Character and block devices, FIFOs and other types are not created:
		// the runtime provides /dev, and nothing else needs them.
		delete(created, name)
		return nil
	}
	if err := u.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := u.root.Chmod(name, perm); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeDir {
		return u.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	}
	return nil
}

// opaque removes everything in dir that lower layers put there.
func (u *unpacker) opaque(dir string, created map[string]bool) error {
	if err := u.root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := u.root.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if created[p] {
			continue
		}
		if err := u.root.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}
