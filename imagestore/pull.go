package imagestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrNoDigest is returned (wrapped) for an image reference that is not pinned by digest.
var ErrNoDigest = errors.New("image reference is not pinned by digest")

// ErrImageUnknown is returned (wrapped) when the registry says the pinned
// manifest does not exist (HTTP 404 / MANIFEST_UNKNOWN / NAME_UNKNOWN).
var ErrImageUnknown = errors.New("registry has no such image")

// PullOptions says how to reach a registry when an image is not in the local store.
type PullOptions struct {
	// Transport carries every registry request (including redirects). It is
	// where the fetch policy lives (runner.Policy.Transport); nil means
	// http.DefaultTransport, for tests and tools only.
	Transport http.RoundTripper
	// AllowHTTP admits plain-http registries. go-containerregistry talks http
	// to localhost, loopback and RFC 1918 registries; without AllowHTTP those
	// are refused (DESIGN.md "Fetching what a stranger's manifest names").
	AllowHTTP bool
	// Offline refuses to pull at all: only the local store is consulted.
	Offline bool
	// Progress, when set, sees the layer bytes pulled so far and their total.
	Progress Progress
}

// ParseRef parses an image reference that must carry "@sha256:<64 hex>". A
// reference with only a tag is refused with ErrNoDigest.
func ParseRef(ref string) (name.Digest, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		if _, terr := name.NewTag(ref); terr == nil {
			return name.Digest{}, fmt.Errorf("%q: %w: name the image as NAME@sha256:<64 hex>", ref, ErrNoDigest)
		}
		return name.Digest{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if _, err := ParseDigest(d.DigestStr()); err != nil {
		return name.Digest{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	return d, nil
}

// Resolve returns the verified image that ref (NAME@sha256:…) pins: from the
// local store when its digest is there, else pulled from the reference's
// registry (never by tag), every blob verified on the way in and the whole
// image re-verified before use. pulled reports whether a registry was contacted.
func (s *Store) Resolve(ctx context.Context, ref string, opts PullOptions) (img *Image, pulled bool, err error) {
	dig, err := ParseRef(ref)
	if err != nil {
		return nil, false, err
	}
	h, _ := ParseDigest(dig.DigestStr())
	img, err = s.Image(h)
	if err == nil {
		return img, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	if opts.Offline {
		return nil, false, fmt.Errorf("image %s: %w and pulling is off", ref, ErrNotFound)
	}
	if err := s.Pull(ctx, dig, opts); err != nil {
		return nil, true, err
	}
	img, err = s.Image(h)
	return img, true, err
}

// Pull fetches the image dig from its registry into the store. Every blob is
// verified against the digest that names it; the image is then re-verified
// from disk (Verify) and recorded in index.json under dig's name.
func (s *Store) Pull(ctx context.Context, dig name.Digest, opts PullOptions) error {
	reg := dig.Context().Registry
	if reg.Scheme() == "http" && !opts.AllowHTTP {
		return fmt.Errorf("image %s: registry %s would be reached over plain http, which is refused (https only; pass --allow-private-urls for a local registry)", dig, reg.Name())
	}
	rt := opts.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
	}
	desc, err := remote.Get(dig, ropts...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return fmt.Errorf("image %s: %w: %v", dig, ErrImageUnknown, err)
		}
		return fmt.Errorf("image %s: %w", dig, err)
	}
	want, _ := ParseDigest(dig.DigestStr())
	if desc.Digest != want {
		return &DigestMismatchError{What: "manifest of " + dig.String(), Expected: want.String(), Actual: desc.Digest.String()}
	}
	what := "image " + dig.String()
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if _, err := s.putIndex(idx, what, opts.Progress); err != nil {
			return err
		}
	} else {
		img, err := desc.Image()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if _, err := s.putImage(img, what, opts.Progress); err != nil {
			return err
		}
	}
	if err := s.putBlob(bytes.NewReader(desc.Manifest), want, int64(len(desc.Manifest)), what+" manifest"); err != nil {
		return err
	}
	if err := s.Verify(want); err != nil {
		return err
	}
	return s.addRef(desc.Descriptor, dig.Context().Name())
}

// putImage copies img into the store through the verifying writer: every layer
// (compressed bytes, checked against the layer digest in the manifest), the
// config, then the manifest. It returns the manifest's descriptor. progress
// (may be nil) sees layer bytes copied so far.
func (s *Store) putImage(img v1.Image, what string, progress Progress) (v1.Descriptor, error) {
	layers, err := img.Layers()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	var total, done int64
	for _, l := range layers {
		if size, err := l.Size(); err == nil {
			total += size
		}
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
		}
		size, err := l.Size()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
		}
		if s.Has(d) {
			continue
		}
		rc, err := l.Compressed()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("%s layer %s: %w", what, d, err)
		}
		var r io.Reader = rc
		if progress != nil {
			r = &progressReader{r: rc, done: &done, total: total, report: progress}
		}
		err = s.putBlob(r, d, size, what+" layer "+d.String())
		rc.Close()
		if err != nil {
			return v1.Descriptor{}, err
		}
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	if err := s.putBlob(bytes.NewReader(cfg), cfgName, int64(len(cfg)), what+" config"); err != nil {
		return v1.Descriptor{}, err
	}
	return s.putManifest(img, what+" manifest")
}

// manifestSource is what images and indexes share: their raw manifest, its digest and media type.
type manifestSource interface {
	RawManifest() ([]byte, error)
	Digest() (v1.Hash, error)
	MediaType() (types.MediaType, error)
}

// putManifest stores the manifest (or index) of m and returns its descriptor.
func (s *Store) putManifest(m manifestSource, what string) (v1.Descriptor, error) {
	raw, err := m.RawManifest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	d, err := m.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := m.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := s.putBlob(bytes.NewReader(raw), d, int64(len(raw)), what); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: d}, nil
}

// putIndex stores an index and the one child image for linux/GOARCH (other
// platforms are not fetched). It returns the index's descriptor.
func (s *Store) putIndex(idx v1.ImageIndex, what string, progress Progress) (v1.Descriptor, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	child, err := pickPlatform(im)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	img, err := idx.Image(child)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := s.putImage(img, what, progress); err != nil {
		return v1.Descriptor{}, err
	}
	return s.putManifest(idx, what+" index")
}

// progressReader reports cumulative bytes read through it.
type progressReader struct {
	r      io.Reader
	done   *int64
	total  int64
	report Progress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	*p.done += int64(n)
	if n > 0 {
		p.report(*p.done, p.total)
	}
	return n, err
}
