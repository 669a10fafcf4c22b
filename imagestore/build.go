package imagestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BuildEpoch is the modification time every entry of a built image carries
// (and the config's "created"), so a tree always packs to the same bytes.
var buildEpoch = time.Unix(0, 0).UTC()

// DefaultPath is the PATH a built image's config declares.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BuildGzipLevel is the compression level of a gzip layer written by
// BuildWith: fixed, so the same tree always compresses to the same bytes.
const BuildGzipLevel = gzip.DefaultCompression

// PackagesLabel is the config label under which an image built by the
// recipes in examples/images records its installed Debian packages, one
// "package=version" a line (dpkg-query order, sorted), as in the image's
// /usr/share/dotlab/packages.txt.
const PackagesLabel = "org.dotlab.packages"

// BuildOptions are BuildWith's choices. The zero value is Build's packing.
type BuildOptions struct {
	// Gzip compresses the layer with gzip (media type tar+gzip), written
	// deterministically: compress/gzip at BuildGzipLevel, a header with no
	// name, comment, extra field or mtime, one stream. The diff_id (the
	// uncompressed tar's digest) is the same as without Gzip; the layer
	// digest depends only on the tree and on Go's compress/flate, which has
	// produced the same bytes for a given level for many releases.
	Gzip bool
	// Env entries (KEY=VALUE) are added to the config's Env after PATH
	// (DefaultPath); a PATH entry replaces DefaultPath.
	Env []string
	// Labels go into the config's Labels (see PackagesLabel).
	Labels map[string]string
}

// Build packs the directory rootfs into a single-layer OCI image, stores it
// under ref (may be empty) and returns the manifest digest. It is BuildWith
// with the zero BuildOptions: an uncompressed layer, PATH only.
//
// The packing is deterministic, so the same tree gives the same digest on any
// machine: entries in lexical order, directories before their contents, every
// mtime at the Unix epoch, owner 0:0 with no user or group names, permission
// bits (including sticky; setuid/setgid are dropped) as found, hard links
// within the tree kept as tar hard links to the first path in that order, and
// an uncompressed layer (no gzip, whose output may differ between versions).
// Devices, FIFOs and sockets are refused. The config names linux and this
// machine's architecture and sets PATH only.
func (s *Store) Build(rootfs, ref string) (v1.Hash, error) {
	return s.BuildWith(rootfs, ref, BuildOptions{})
}

// BuildWith is Build with options: a deterministic gzip layer, config Env
// entries and labels.
func (s *Store) BuildWith(rootfs, ref string, o BuildOptions) (v1.Hash, error) {
	env, err := buildEnv(o.Env)
	if err != nil {
		return v1.Hash{}, err
	}
	for k := range o.Labels {
		if k == "" {
			return v1.Hash{}, errors.New("build: empty label key")
		}
	}
	tmp, err := os.CreateTemp(s.tmpDir(), "build-*.tar")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	layerHash, diffHash := sha256.New(), sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, layerHash), 1<<20)
	mediaType := types.OCIUncompressedLayer
	if o.Gzip {
		mediaType = types.OCILayer
		zw, err := gzip.NewWriterLevel(bw, BuildGzipLevel)
		if err != nil {
			return v1.Hash{}, err
		}
		zw.Header = gzip.Header{OS: 255} // no name, comment or mtime; OS "unknown"
		if err := writeTree(io.MultiWriter(zw, diffHash), rootfs); err != nil {
			return v1.Hash{}, fmt.Errorf("build %s: %w", rootfs, err)
		}
		if err := zw.Close(); err != nil {
			return v1.Hash{}, err
		}
	} else if err := writeTree(io.MultiWriter(bw, diffHash), rootfs); err != nil {
		return v1.Hash{}, fmt.Errorf("build %s: %w", rootfs, err)
	}
	if err := bw.Flush(); err != nil {
		return v1.Hash{}, err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return v1.Hash{}, err
	}
	layerDigest := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(layerHash.Sum(nil))}
	diffID := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(diffHash.Sum(nil))}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return v1.Hash{}, err
	}
	if err := s.putBlob(tmp, layerDigest, size, "built layer"); err != nil {
		return v1.Hash{}, err
	}
	cfg := v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: buildEpoch},
		Config:       v1.Config{Env: env, Labels: o.Labels},
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
	}
	if len(o.Labels) == 0 {
		cfg.Config.Labels = nil
	}
	cfgDesc, err := s.putJSON(cfg, types.OCIConfigJSON, "built config")
	if err != nil {
		return v1.Hash{}, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        cfgDesc,
		Layers:        []v1.Descriptor{{MediaType: mediaType, Size: size, Digest: layerDigest}},
	}
	mDesc, err := s.putJSON(m, types.OCIManifestSchema1, "built manifest")
	if err != nil {
		return v1.Hash{}, err
	}
	return mDesc.Digest, s.addRef(mDesc, ref)
}

// buildEnv is DefaultPath followed by extra (KEY=VALUE each); a PATH entry
// replaces DefaultPath, and a later entry replaces an earlier one of the same key.
func buildEnv(extra []string) ([]string, error) {
	env := []string{DefaultPath}
	index := map[string]int{"PATH": 0}
	for _, e := range extra {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") {
			return nil, fmt.Errorf("build: env %q is not KEY=VALUE", e)
		}
		if i, dup := index[k]; dup {
			env[i] = e
			continue
		}
		index[k] = len(env)
		env = append(env, e)
	}
	return env, nil
}

// putJSON stores v marshalled as JSON and returns its descriptor.
func (s *Store) putJSON(v any, mt types.MediaType, what string) (v1.Descriptor, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, err := ParseDigest(sha256Digest(raw))
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := s.putBlob(bytes.NewReader(raw), d, int64(len(raw)), what); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: d}, nil
}

// writeTree writes the deterministic tar of dir to w (see Build).
func writeTree(w io.Writer, dir string) error {
	t := &treeWriter{tw: tar.NewWriter(w), dir: dir, seen: map[inode]string{}}
	if err := filepath.WalkDir(dir, t.entry); err != nil {
		return err
	}
	return t.tw.Close()
}

// inode identifies a file across hard links.
type inode struct{ dev, ino uint64 }

// treeWriter is writeTree's state: the tar being written, the root it packs
// and the first path seen for each hard-linked inode.
type treeWriter struct {
	tw   *tar.Writer
	dir  string
	seen map[inode]string
}

// entry is the filepath.WalkDir callback: it writes the entry at p.
func (t *treeWriter) entry(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(t.dir, p)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	rel = filepath.ToSlash(rel)
	fi, err := d.Info()
	if err != nil {
		return err
	}
	hdr, err := t.header(p, rel, fi)
	if err != nil {
		return err
	}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	return t.copyFile(p, hdr.Size)
}

// header builds the deterministic tar header of the entry at p (rel within
// the tree): a directory, a symlink, a regular file or a hard link to a file
// already packed. Other file types are refused.
func (t *treeWriter) header(p, rel string, fi fs.FileInfo) (*tar.Header, error) {
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(fi.Mode().Perm()),
		ModTime: buildEpoch,
		Format:  tar.FormatPAX,
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	mode := fi.Mode()
	switch {
	case mode.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		hdr.Mode = 0o777
	case mode.IsRegular():
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino}
			if first, dup := t.seen[key]; dup {
				hdr.Typeflag = tar.TypeLink
				hdr.Linkname = first
				return hdr, nil
			}
			t.seen[key] = rel
		}
		hdr.Typeflag = tar.TypeReg
		hdr.Size = fi.Size()
	default:
		return nil, fmt.Errorf("%s: %s files cannot go into an image", p, mode.Type())
	}
	return hdr, nil
}

// copyFile writes the contents of the regular file p, which must still be
// size bytes long.
func (t *treeWriter) copyFile(p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(t.tw, f)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%s changed size while packing", p)
	}
	return nil
}
