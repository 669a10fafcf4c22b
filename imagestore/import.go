package imagestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/dotlab/dotlab/internal/safefs"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Imported is one image (or index) that Import added to the store.
type Imported struct {
	Ref    string  `json:"ref,omitempty"`
	Digest v1.Hash `json:"digest"`
}

// Import loads the images found at path into the store and returns their
// digests. path may be an OCI image layout directory, an OCI archive (a tar,
// optionally gzipped, of such a directory; `docker save` of Docker 25+ is one)
// or a classic docker-save tarball (manifest.json). Every blob is verified on
// the way in. ref, when not empty, names the imported image(s) in index.json
// instead of the names the source carries.
//
// A docker-save tarball has no manifest of its own: go-containerregistry
// writes one (and gzips uncompressed layers), so its digest is that of the
// stored manifest, not a registry's.
func (s *Store) Import(src, ref string) ([]Imported, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(src, "oci-layout")); err != nil {
			return nil, fmt.Errorf("import %s: a directory must be an OCI image layout (no oci-layout file)", src)
		}
		return s.importLayout(src, ref)
	}
	kind, err := sniffArchive(src)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	switch kind {
	case "oci":
		tmp, err := os.MkdirTemp(s.tmpDir(), "import-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := extractPlainTar(src, tmp); err != nil {
			return nil, fmt.Errorf("import %s: %w", src, err)
		}
		return s.importLayout(tmp, ref)
	case "docker":
		return s.importDockerSave(src, ref)
	}
	return nil, fmt.Errorf("import %s: not an OCI layout, OCI archive or docker-save tarball", src)
}

// openMaybeGzip opens a file, transparently un-gzipping it when it starts with the gzip magic.
func openMaybeGzip(p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	magic, _ := br.Peek(2)
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, f}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, f}, nil
}

// sniffArchive says "oci" for a tar holding oci-layout, "docker" for one with
// manifest.json only, "" otherwise.
func sniffArchive(p string) (string, error) {
	rc, err := openMaybeGzip(p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	docker := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("not a tar archive: %w", err)
		}
		switch path.Clean(h.Name) {
		case "oci-layout":
			return "oci", nil
		case "manifest.json":
			docker = true
		}
	}
	if docker {
		return "docker", nil
	}
	return "", nil
}

// extractPlainTar writes the directories and regular files of the tar at src
// under dir through an os.Root (nothing can land outside dir); any other entry
// type is refused.
func extractPlainTar(src, dir string) error {
	rc, err := openMaybeGzip(src)
	if err != nil {
		return err
	}
	defer rc.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return safefs.ExtractTar(root, rc, safefs.TarOptions{Strict: true})
}

// importLayout copies every image named in dir/index.json into the store.
func (s *Store) importLayout(dir, ref string) ([]Imported, error) {
	f, err := os.Open(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, err
	}
	idx, err := v1.ParseIndexManifest(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s/index.json: %w", dir, err)
	}
	if len(idx.Manifests) == 0 {
		return nil, fmt.Errorf("%s/index.json lists no images", dir)
	}
	src := layoutSource(dir)
	var out []Imported
	for _, desc := range idx.Manifests {
		if err := s.copyTree(src, desc, 0); err != nil {
			return nil, err
		}
		name := ref
		if name == "" {
			name = desc.Annotations[RefAnnotation]
		}
		if err := s.Verify(desc.Digest); err != nil {
			return nil, err
		}
		if err := s.addRef(desc, name); err != nil {
			return nil, err
		}
		out = append(out, Imported{Ref: name, Digest: desc.Digest})
	}
	return out, nil
}

// layoutSource opens blobs of an OCI layout directory.
type layoutSource string

func (l layoutSource) open(d v1.Hash) (io.ReadCloser, error) {
	if d.Algorithm != "sha256" || len(d.Hex) != 64 {
		return nil, fmt.Errorf("unsupported digest %s", d)
	}
	return os.Open(filepath.Join(string(l), "blobs", d.Algorithm, d.Hex))
}

// copyTree copies desc and everything it references (for an index: only the
// linux/GOARCH image) from src into the store, verifying each blob.
func (s *Store) copyTree(src layoutSource, desc v1.Descriptor, depth int) error {
	if depth > 2 {
		return fmt.Errorf("%s: nested indexes deeper than 2", desc.Digest)
	}
	rc, err := src.open(desc.Digest)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	rc.Close()
	if err != nil {
		return err
	}
	what := "blob " + desc.Digest.String()
	if err := s.putBlob(bytes.NewReader(raw), desc.Digest, int64(len(raw)), what); err != nil {
		return err
	}
	mt, err := mediaTypeOf(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if mt.IsIndex() {
		im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		child, err := pickPlatform(im)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, c := range im.Manifests {
			if c.Digest == child {
				return s.copyTree(src, c, depth+1)
			}
		}
		return nil
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if s.Has(b.Digest) {
			continue
		}
		rc, err := src.open(b.Digest)
		if err != nil {
			return err
		}
		err = s.putBlob(rc, b.Digest, b.Size, "blob "+b.Digest.String())
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// importDockerSave imports each image of a classic docker-save tarball.
func (s *Store) importDockerSave(src, ref string) ([]Imported, error) {
	opener := func() (io.ReadCloser, error) { return openMaybeGzip(src) }
	mf, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	var out []Imported
	for i, entry := range mf {
		var tag *name.Tag
		if len(mf) > 1 {
			if len(entry.RepoTags) == 0 {
				return nil, fmt.Errorf("import %s: image %d has no tag to select it by", src, i)
			}
			t, err := name.NewTag(entry.RepoTags[0])
			if err != nil {
				return nil, err
			}
			tag = &t
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", src, err)
		}
		desc, err := s.putImage(img, "import "+src, nil)
		if err != nil {
			return nil, err
		}
		if err := s.Verify(desc.Digest); err != nil {
			return nil, err
		}
		name := ref
		if name == "" && len(entry.RepoTags) > 0 {
			name = entry.RepoTags[0]
		}
		if err := s.addRef(desc, name); err != nil {
			return nil, err
		}
		out = append(out, Imported{Ref: name, Digest: desc.Digest})
	}
	if len(out) == 0 {
		return nil, errors.New("import " + src + ": manifest.json lists no images")
	}
	return out, nil
}
