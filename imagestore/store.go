// Package imagestore keeps OCI container images by digest on the local disk and
// turns them into read-only root filesystems for the sandbox.
//
// Layout of a store directory DIR (docs/sandbox.md "The workflow", step 2:
// resolve the image by digest, unpack once per digest into a read-only rootfs
// cache):
//
//	DIR/oci/               an OCI image layout (oci-layout, index.json, blobs/sha256/<hex>)
//	DIR/rootfs/sha256/<hex>/  the unpacked root filesystem of image manifest <hex>
//	DIR/tmp/               scratch space for writes that are renamed into place
//
// Every blob enters the store through one verifying writer: it is streamed to
// DIR/tmp while its sha256 is computed, compared with the digest it was asked
// for, and only then renamed to blobs/sha256/<hex>. A blob file in the store is
// therefore always the bytes its name says. Reads verify again (manifests and
// configs on every read, layers while they are unpacked), so a store modified
// behind our back is detected, not trusted.
package imagestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefAnnotation is the index.json annotation that names an image (OCI image-spec).
const RefAnnotation = "org.opencontainers.image.ref.name"

// maxManifestBytes bounds manifests, indexes and configs read into memory.
const maxManifestBytes = 8 << 20

// ErrNotFound is returned (wrapped) when a digest is not in the local store.
var ErrNotFound = errors.New("not in the local image store")

// DigestMismatchError reports a blob whose bytes do not hash to the digest that
// names it. What says where the blob came from (a registry URL, a file path).
type DigestMismatchError struct {
	What     string
	Expected string
	Actual   string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("%s: digest mismatch: expected %s, got %s", e.What, e.Expected, e.Actual)
}

// Store is a local OCI image store rooted at one directory (see the package
// documentation for its layout). It is safe for concurrent use by several
// processes: index.json updates take a file lock and every other write is a
// rename of a finished temporary file.
type Store struct {
	dir string
	// Limits bound each pull and unpack (zero fields: the Default*
	// constants). Set it after Open, before use; it is read, never written,
	// by the store.
	Limits Limits
}

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: abs}
	for _, d := range []string{s.layoutDir(), filepath.Join(s.layoutDir(), "blobs", "sha256"), s.tmpDir(), filepath.Join(abs, "rootfs", "sha256")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("image store %s: %w", abs, err)
		}
	}
	layoutFile := filepath.Join(s.layoutDir(), "oci-layout")
	if _, err := os.Stat(layoutFile); errors.Is(err, os.ErrNotExist) {
		if err := s.writeFileAtomic(layoutFile, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			return nil, err
		}
	}
	idx := filepath.Join(s.layoutDir(), "index.json")
	if _, err := os.Stat(idx); errors.Is(err, os.ErrNotExist) {
		if err := s.writeFileAtomic(idx, []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Dir is the store's root directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) layoutDir() string { return filepath.Join(s.dir, "oci") }
func (s *Store) tmpDir() string    { return filepath.Join(s.dir, "tmp") }

func (s *Store) blobPath(d v1.Hash) string {
	return filepath.Join(s.layoutDir(), "blobs", d.Algorithm, d.Hex)
}

func (s *Store) writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(s.tmpDir(), "write-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// ParseDigest parses "sha256:<64 lowercase hex>"; any other algorithm or form is an error.
func ParseDigest(s string) (v1.Hash, error) {
	h, err := v1.NewHash(s)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("digest %q: %w", s, err)
	}
	if h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.ToLower(h.Hex) != h.Hex {
		return v1.Hash{}, fmt.Errorf("digest %q: want sha256:<64 lowercase hex>", s)
	}
	return h, nil
}

// Has reports whether the blob d is present in the store.
func (s *Store) Has(d v1.Hash) bool {
	fi, err := os.Lstat(s.blobPath(d))
	return err == nil && fi.Mode().IsRegular()
}

// putBlob streams r into the store as blob want, hashing while it writes, and
// refuses (DigestMismatchError naming what) if the bytes hash to anything else
// or if size >= 0 and the length differs. An existing blob is kept: r is not read.
func (s *Store) putBlob(r io.Reader, want v1.Hash, size int64, what string) error {
	if want.Algorithm != "sha256" {
		return fmt.Errorf("%s: unsupported digest algorithm %q", what, want.Algorithm)
	}
	if s.Has(want) {
		return nil
	}
	f, err := os.CreateTemp(s.tmpDir(), "blob-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != want.String() {
		return &DigestMismatchError{What: what, Expected: want.String(), Actual: got}
	}
	if size >= 0 && n != size {
		return fmt.Errorf("%s: size mismatch: descriptor says %d bytes, blob has %d", what, size, n)
	}
	if err := os.Chmod(f.Name(), 0o444); err != nil {
		return err
	}
	return os.Rename(f.Name(), s.blobPath(want))
}

// readBlob reads a small blob (manifest, index, config) and verifies its digest.
func (s *Store) readBlob(d v1.Hash) ([]byte, error) {
	f, err := os.Open(s.blobPath(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", d, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("blob %s: larger than %d bytes, not a manifest or config", d, maxManifestBytes)
	}
	if got := sha256Digest(data); got != d.String() {
		return nil, &DigestMismatchError{What: "stored blob " + d.String(), Expected: d.String(), Actual: got}
	}
	return data, nil
}

func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Image is a resolved, verified image: the digest that was asked for (a
// manifest or an index), the platform manifest it resolved to, and its config.
type Image struct {
	// Digest is the digest that was asked for (the manifest's environment.image digest).
	Digest v1.Hash
	// ManifestDigest is the image manifest's digest (equal to Digest unless Digest names an index).
	ManifestDigest v1.Hash
	Manifest       *v1.Manifest
	Config         *v1.ConfigFile
}

// mediaTypeOf reads the mediaType field of a manifest or index (schemaVersion 2).
func mediaTypeOf(data []byte) (types.MediaType, error) {
	var probe struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     types.MediaType `json:"mediaType"`
		Manifests     json.RawMessage `json:"manifests"`
		Config        json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return "", err
	}
	if probe.SchemaVersion != 2 {
		return "", fmt.Errorf("schemaVersion %d is not supported (want 2)", probe.SchemaVersion)
	}
	switch {
	case probe.MediaType != "":
		return probe.MediaType, nil
	case probe.Manifests != nil:
		return types.OCIImageIndex, nil
	case probe.Config != nil:
		return types.OCIManifestSchema1, nil
	}
	return "", errors.New("neither an image manifest nor an index")
}

// Image resolves digest d in the local store to a platform image (linux and
// this machine's architecture when d is an index), verifying the manifest and
// config blobs. Errors wrap ErrNotFound when a blob is absent.
func (s *Store) Image(d v1.Hash) (*Image, error) {
	return s.image(d, d, 0)
}

func (s *Store) image(asked, d v1.Hash, depth int) (*Image, error) {
	if depth > 2 {
		return nil, fmt.Errorf("image %s: nested indexes deeper than 2", asked)
	}
	data, err := s.readBlob(d)
	if err != nil {
		return nil, err
	}
	mt, err := mediaTypeOf(data)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", d, err)
	}
	if mt.IsIndex() {
		idx, err := v1.ParseIndexManifest(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", d, err)
		}
		child, err := pickPlatform(idx)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", d, err)
		}
		return s.image(asked, child, depth+1)
	}
	if !mt.IsImage() && mt != types.OCIManifestSchema1 {
		return nil, fmt.Errorf("image %s: unsupported media type %q", d, mt)
	}
	m, err := v1.ParseManifest(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	cfgData, err := s.readBlob(m.Config.Digest)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", d, err)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(cfgData))
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", d, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("image %s: config lists %d diff_ids for %d layers", d, len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	return &Image{Digest: asked, ManifestDigest: d, Manifest: m, Config: cfg}, nil
}

// pickPlatform chooses linux/GOARCH from an index (the only entry if there is one).
func pickPlatform(idx *v1.IndexManifest) (v1.Hash, error) {
	want := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	var found []v1.Hash
	for _, m := range idx.Manifests {
		if m.Platform != nil && m.Platform.OS == want.OS && m.Platform.Architecture == want.Architecture {
			found = append(found, m.Digest)
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	if len(idx.Manifests) == 1 && idx.Manifests[0].Platform == nil {
		return idx.Manifests[0].Digest, nil
	}
	return v1.Hash{}, fmt.Errorf("no manifest for platform %s/%s", want.OS, want.Architecture)
}

// Verify re-hashes every blob the image d references (index, manifest, config,
// every layer) and returns the first mismatch or missing blob.
func (s *Store) Verify(d v1.Hash) error {
	img, err := s.Image(d)
	if err != nil {
		return err
	}
	for _, l := range img.Manifest.Layers {
		if err := s.verifyBlobFile(l.Digest, l.Size); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) verifyBlobFile(d v1.Hash, size int64) error {
	f, err := os.Open(s.blobPath(d))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("layer %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != d.String() {
		return &DigestMismatchError{What: "stored layer " + d.String(), Expected: d.String(), Actual: got}
	}
	if n != size {
		return fmt.Errorf("stored layer %s: %d bytes, descriptor says %d", d, n, size)
	}
	return nil
}

// Entry is one named image in the store's index.json.
type Entry struct {
	Ref       string          `json:"ref,omitempty"`
	Digest    string          `json:"digest"`
	MediaType types.MediaType `json:"media_type"`
	Size      int64           `json:"size"`
}

// List returns the entries of index.json in order.
func (s *Store) List() ([]Entry, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(idx.Manifests))
	for _, m := range idx.Manifests {
		out = append(out, Entry{Ref: m.Annotations[RefAnnotation], Digest: m.Digest.String(), MediaType: m.MediaType, Size: m.Size})
	}
	return out, nil
}

func (s *Store) readIndex() (*v1.IndexManifest, error) {
	f, err := os.Open(filepath.Join(s.layoutDir(), "index.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return v1.ParseIndexManifest(f)
}

// addRef records desc in index.json under ref (ref may be empty). An entry with
// the same digest and ref is not duplicated.
func (s *Store) addRef(desc v1.Descriptor, ref string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	for _, m := range idx.Manifests {
		if m.Digest == desc.Digest && m.Annotations[RefAnnotation] == ref {
			return nil
		}
	}
	d := v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest}
	if ref != "" {
		d.Annotations = map[string]string{RefAnnotation: ref}
	}
	idx.Manifests = append(idx.Manifests, d)
	if idx.MediaType == "" {
		idx.MediaType = types.OCIImageIndex
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	return s.writeFileAtomic(filepath.Join(s.layoutDir(), "index.json"), data)
}

// lock takes an exclusive flock on DIR/oci/index.json.lock.
func (s *Store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.layoutDir(), "index.json.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
