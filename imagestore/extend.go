package imagestore

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ExportLayout writes image img as a one-image OCI layout under dir (which
// must not exist): oci-layout, an index.json naming the image manifest as
// refName, and its blobs hard-linked from the store (copied when the store
// is on another file system). It is how a builder (buildah's oci:
// transport) reads a store image without a registry.
func (s *Store) ExportLayout(img *Image, dir, refName string) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	digests := []v1.Hash{img.ManifestDigest, img.Manifest.Config.Digest}
	for _, l := range img.Manifest.Layers {
		digests = append(digests, l.Digest)
	}
	for _, d := range digests {
		dst := filepath.Join(blobs, d.Hex)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.Link(s.blobPath(d), dst); err != nil {
			if err := copyRegular(s.blobPath(d), dst); err != nil {
				return fmt.Errorf("export %s: %w", d, err)
			}
		}
	}
	raw, err := s.readBlob(img.ManifestDigest)
	if err != nil {
		return err
	}
	mt := img.Manifest.MediaType
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: mt, Size: int64(len(raw)), Digest: img.ManifestDigest,
		Annotations: map[string]string{RefAnnotation: refName},
	}}}
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

func copyRegular(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Extend stores a new image made of base's layers, reused as they are (the
// same blobs, media types and sizes: nothing is repacked or recompressed),
// followed by the uncompressed layer tars named in layers, each written as
// a deterministic gzip layer (BuildOptions.Gzip's writer). base may be nil
// (an image from scratch). cfg is the new image's config; its
// rootfs.diff_ids are set here (base's, then the new layers'), so the
// result always describes its layers. The manifest digest is returned and
// recorded under ref (may be empty).
func (s *Store) Extend(base *Image, cfg v1.ConfigFile, layers []string, ref string) (v1.Hash, error) {
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1}
	cfg.RootFS = v1.RootFS{Type: "layers"}
	if base != nil {
		if len(base.Config.RootFS.DiffIDs) != len(base.Manifest.Layers) {
			return v1.Hash{}, errors.New("extend: base image has a config whose diff_ids do not match its layers")
		}
		m.Layers = append(m.Layers, base.Manifest.Layers...)
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, base.Config.RootFS.DiffIDs...)
	}
	for _, p := range layers {
		desc, diffID, err := s.putGzipLayer(p)
		if err != nil {
			return v1.Hash{}, err
		}
		m.Layers = append(m.Layers, desc)
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
	}
	cfgDesc, err := s.putJSON(cfg, types.OCIConfigJSON, "extended config")
	if err != nil {
		return v1.Hash{}, err
	}
	m.Config = cfgDesc
	mDesc, err := s.putJSON(m, types.OCIManifestSchema1, "extended manifest")
	if err != nil {
		return v1.Hash{}, err
	}
	return mDesc.Digest, s.addRef(mDesc, ref)
}

// putGzipLayer compresses the tar at path deterministically into the store
// and returns its descriptor and diff_id.
func (s *Store) putGzipLayer(path string) (v1.Descriptor, v1.Hash, error) {
	in, err := os.Open(path)
	if err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(s.tmpDir(), "layer-*.tar.gz")
	if err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	layerHash, diffHash := sha256.New(), sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, layerHash), 1<<20)
	zw, err := gzip.NewWriterLevel(bw, BuildGzipLevel)
	if err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	zw.Header = gzip.Header{OS: 255}
	if _, err := io.Copy(io.MultiWriter(zw, diffHash), in); err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	if err := zw.Close(); err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	if err := bw.Flush(); err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(layerHash.Sum(nil))}
	diffID := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(diffHash.Sum(nil))}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	if err := s.putBlob(tmp, d, size, "new layer"); err != nil {
		return v1.Descriptor{}, v1.Hash{}, err
	}
	return v1.Descriptor{MediaType: types.OCILayer, Size: size, Digest: d}, diffID, nil
}

// Name records the image d (which must be in the store) under ref in
// index.json; an empty ref records nothing.
func (s *Store) Name(d v1.Hash, ref string) error {
	if ref == "" {
		return nil
	}
	raw, err := s.readBlob(d)
	if err != nil {
		return err
	}
	mt, err := mediaTypeOf(raw)
	if err != nil {
		return err
	}
	return s.addRef(v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: d}, ref)
}
