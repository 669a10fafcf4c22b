package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// MaxLayerBytes bounds one new layer (uncompressed): larger is refused.
const MaxLayerBytes = 32 << 30

// trimmedDirs are directories whose contents a new layer never keeps (the
// trims of examples/images/lib.sh dotlab_trim: caches, logs, documentation,
// manuals, translations, scratch space, device nodes): the directory entry
// itself stays.
var trimmedDirs = []string{
	"var/lib/apt/lists/", "var/cache/apt/", "var/cache/ldconfig/", "usr/share/doc/",
	"usr/share/man/", "usr/share/info/", "usr/share/locale/", "var/log/", "var/lib/systemd/",
	"var/cache/fontconfig/", "tmp/", "var/tmp/", "dev/", "root/.cache/", "run/",
}

// trimmedFiles are single paths a new layer never keeps (they vary between builds).
var trimmedFiles = map[string]bool{
	"etc/machine-id": true, "etc/hostname": true, "etc/resolv.conf": true, "etc/hosts": true,
	"root/.bash_history": true, "root/.cache": true, "root/.wget-hsts": true,
	"root/.python_history": true, "var/cache/ldconfig/aux-cache": true,
}

// trimmed reports whether the layer path p (relative, no leading slash) is
// dropped by the trims; a whiteout is judged by the path it deletes.
func trimmed(p string) bool {
	p = strings.TrimPrefix(strings.TrimPrefix(p, "./"), "/")
	dir, base := path.Split(strings.TrimSuffix(p, "/"))
	if strings.HasPrefix(base, ".wh.") && base != ".wh..wh..opq" {
		p = dir + strings.TrimPrefix(base, ".wh.")
		base = strings.TrimPrefix(base, ".wh.")
	}
	clean := strings.TrimSuffix(p, "/")
	if trimmedFiles[clean] {
		return true
	}
	for _, d := range trimmedDirs {
		if strings.HasPrefix(clean, d) {
			return true
		}
	}
	for _, c := range strings.Split(clean, "/") {
		if c == "__pycache__" {
			return true
		}
	}
	switch {
	case dir == "etc/" && strings.HasSuffix(base, "-"): // passwd-, shadow-, … backups
		return true
	case (dir == "var/cache/debconf/" || dir == "var/lib/dpkg/") && strings.HasSuffix(base, "-old"):
		return true
	case dir == "var/lib/dpkg/info/" && strings.HasSuffix(base, ".md5sums"):
		return true
	}
	return false
}

// normalizeLayer copies the layer tar r to w, dropping the trimmed paths
// and writing every kept entry with a canonical header: the order buildah
// wrote (a sorted walk), mtime at the Unix epoch, no access or change time,
// no user or group names, PAX format, and of the PAX records only extended
// attributes (SCHILY.xattr.*, but security.selinux, which is the host's).
// Device nodes are refused (the runtime provides /dev). It returns what
// the layer says about the image's Debian packages (layerInfo).
func normalizeLayer(r io.Reader, w io.Writer) (layerInfo, error) {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	var total int64
	var info layerInfo
	kept := &info.entries
	dropped := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return info, fmt.Errorf("new layer: %w", err)
		}
		if trimmed(hdr.Name) {
			if hdr.Typeflag == tar.TypeReg {
				dropped[hdr.Name] = true
			}
			continue
		}
		if hdr.Typeflag == tar.TypeLink && dropped[hdr.Linkname] {
			continue // a hard link to a trimmed file goes with it
		}
		if hdr.Typeflag == tar.TypeChar || hdr.Typeflag == tar.TypeBlock || hdr.Typeflag == tar.TypeFifo {
			return info, fmt.Errorf("new layer: %s is a device or FIFO: %w (a build step may not create devices; the runtime provides /dev)", hdr.Name, ErrRefused)
		}
		if total += hdr.Size; total > MaxLayerBytes {
			return info, fmt.Errorf("new layer: over %d bytes: %w (bounded build)", int64(MaxLayerBytes), ErrRefused)
		}
		out := &tar.Header{Typeflag: hdr.Typeflag, Name: hdr.Name, Linkname: hdr.Linkname, Size: hdr.Size,
			Mode: hdr.Mode, Uid: hdr.Uid, Gid: hdr.Gid, ModTime: time.Unix(0, 0).UTC(), Format: tar.FormatPAX}
		for k, v := range hdr.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") && k != "SCHILY.xattr.security.selinux" {
				if out.PAXRecords == nil {
					out.PAXRecords = map[string]string{}
				}
				out.PAXRecords[k] = v
			}
		}
		if err := tw.WriteHeader(out); err != nil {
			return info, err
		}
		if err := info.copy(tw, tr, hdr); err != nil {
			return info, err
		}
		*kept++
	}
	return info, tw.Close()
}

// layerInfo is what a new layer says about the image's packages: whether
// it changes dpkg's status (packages were installed or removed) and the
// package list the recipes write (PackagesFile), when it writes one.
type layerInfo struct {
	entries       int
	dpkgChanged   bool
	packages      []byte
	packagesFound bool
}

// PackagesFile is where the recipes (examples/images/lib.sh) and the apt.txt
// build step record the installed packages, one "package=version" a line.
const PackagesFile = "usr/share/dotlab/packages.txt"

// copy writes the body of a regular entry, noting the package files.
func (info *layerInfo) copy(tw *tar.Writer, tr io.Reader, hdr *tar.Header) error {
	name := strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "/")
	if name == "var/lib/dpkg/status" || name == "var/lib/dpkg/.wh.status" {
		info.dpkgChanged = true
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	var body io.Reader = tr
	var capture bytes.Buffer
	if name == PackagesFile && hdr.Size <= 1<<20 {
		body = io.TeeReader(tr, &capture)
	}
	if _, err := io.CopyN(tw, body, hdr.Size); err != nil {
		return fmt.Errorf("new layer %s: %w", hdr.Name, err)
	}
	if name == PackagesFile && hdr.Size <= 1<<20 {
		info.packages, info.packagesFound = capture.Bytes(), true
	}
	return nil
}
