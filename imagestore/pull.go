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
	// http.DefaultTransport, for tests and tools only. Pull wraps it so that
	// only the image's registry, the token realm that registry announces and
	// redirect hops are ever requested (registryGuard).
	Transport http.RoundTripper
	// AllowHTTP admits plain-http registries. go-containerregistry talks http
	// to localhost, loopback and RFC 1918 registries; without AllowHTTP those
	// are refused (docs/sandbox.md "Fetching what a manifest names").
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

// Pull fetches the image dig from its registry into the store and records it
// in index.json under dig's name.
//
// Every request goes to dig's registry (and the token realm its own 401
// challenge names, and redirect hops; registryGuard refuses anything else),
// through opts.Transport. The manifest (and, for an index, the linux/GOARCH
// child manifest) is fetched by digest; the config and every layer are then
// fetched by digest from the same repository, so a descriptor's "urls"
// (foreign or non-distributable layers) are never contacted: a layer the
// registry does not hold fails the pull. Before any blob is fetched, the sum
// of the pinned sizes is checked against Limits.MaxPullBytes, and no blob is
// read past its pinned size. Each blob is verified against its digest as it
// is written, and the image is re-verified from disk (Verify) at the end.
//
// Refusals of a layer media type, of a limit or of a request to a foreign
// host wrap ErrUnsafeImage.
func (s *Store) Pull(ctx context.Context, dig name.Digest, opts PullOptions) error {
	reg := dig.Context().Registry
	if reg.Scheme() == "http" && !opts.AllowHTTP {
		return fmt.Errorf("image %s: registry %s would be reached over plain http, which is refused (https only; pass --allow-private-urls for a local registry)", dig, reg.Name())
	}
	limits, err := s.Limits.effective()
	if err != nil {
		return err
	}
	rt := opts.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	puller, err := remote.NewPuller(
		remote.WithContext(ctx),
		remote.WithTransport(newRegistryGuard(reg.RegistryStr(), reg.Scheme(), rt)),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
	)
	if err != nil {
		return err
	}
	what := "image " + dig.String()
	p := &pull{store: s, ctx: ctx, puller: puller, repo: dig.Context(), limits: limits, what: what, progress: opts.Progress}
	want, _ := ParseDigest(dig.DigestStr())
	raw, mt, err := p.manifest(want)
	if err != nil {
		return anonymousRefusal(err)
	}
	topType := mt
	manifests := []struct {
		raw []byte
		d   v1.Hash
	}{{raw, want}}
	if mt.IsIndex() {
		idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("%s index: %w", what, err)
		}
		child, err := pickPlatform(idx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if raw, mt, err = p.manifest(child); err != nil {
			return err
		}
		if mt.IsIndex() {
			return fmt.Errorf("%s: index %s names another index for linux/%s; nested indexes are not supported", what, want, runtime.GOARCH)
		}
		manifests = append(manifests, struct {
			raw []byte
			d   v1.Hash
		}{raw, child})
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s manifest: %w", what, err)
	}
	if err := p.blobs(m); err != nil {
		return err
	}
	// Manifests last, child before index: a manifest in the store always has its blobs.
	for i := len(manifests) - 1; i >= 0; i-- {
		if err := s.putBlob(bytes.NewReader(manifests[i].raw), manifests[i].d, int64(len(manifests[i].raw)), what+" manifest "+manifests[i].d.String()); err != nil {
			return err
		}
	}
	if err := s.Verify(want); err != nil {
		return err
	}
	return s.addRef(v1.Descriptor{MediaType: topType, Size: int64(len(manifests[0].raw)), Digest: want}, dig.Context().Name())
}

// pull is the state of one Pull: its registry client, its byte budget.
type pull struct {
	store    *Store
	ctx      context.Context
	puller   *remote.Puller
	repo     name.Repository
	limits   Limits
	what     string
	progress Progress
	fetched  int64 // bytes received so far, all blobs
}

// manifest fetches the manifest (or index) d by digest, charging its bytes to
// the budget, and returns it with its media type.
func (p *pull) manifest(d v1.Hash) ([]byte, types.MediaType, error) {
	desc, err := p.puller.Get(p.ctx, p.repo.Digest(d.String()))
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return nil, "", fmt.Errorf("%s: manifest %s: %w: %v", p.what, d, ErrImageUnknown, err)
		}
		return nil, "", fmt.Errorf("%s: manifest %s: %w", p.what, d, err)
	}
	if desc.Digest != d || sha256Digest(desc.Manifest) != d.String() {
		return nil, "", &DigestMismatchError{What: "manifest of " + p.what, Expected: d.String(), Actual: sha256Digest(desc.Manifest)}
	}
	if len(desc.Manifest) > maxManifestBytes {
		return nil, "", limitError("MaxPullBytes", maxManifestBytes, fmt.Sprintf("manifest %s of %d bytes", d, len(desc.Manifest)))
	}
	if p.fetched += int64(len(desc.Manifest)); p.fetched > p.limits.MaxPullBytes {
		return nil, "", limitError("MaxPullBytes", p.limits.MaxPullBytes, fmt.Sprintf("pull of %d bytes", p.fetched))
	}
	mt, err := mediaTypeOf(desc.Manifest)
	if err != nil {
		return nil, "", fmt.Errorf("%s: manifest %s: %w", p.what, d, err)
	}
	if !mt.IsIndex() && !mt.IsImage() && mt != types.OCIManifestSchema1 {
		return nil, "", fmt.Errorf("%s: manifest %s has unsupported media type %q", p.what, d, mt)
	}
	return desc.Manifest, mt, nil
}

// blobs fetches m's config and layers that the store lacks, by digest from
// the repository, after checking their media types and total pinned size.
func (p *pull) blobs(m *v1.Manifest) error {
	if m.Config.Size < 0 || m.Config.Size > maxManifestBytes {
		return limitError("MaxPullBytes", maxManifestBytes, fmt.Sprintf("config %s of %d bytes", m.Config.Digest, m.Config.Size))
	}
	need := p.fetched + m.Config.Size
	var total int64
	for i, l := range m.Layers {
		if !l.MediaType.IsLayer() {
			return fmt.Errorf("%w: %s layer %d (%s) has media type %q, which is not a known layer type (rule: OCI or Docker tar, tar+gzip or tar+zstd layers only)", ErrUnsafeImage, p.what, i, l.Digest, l.MediaType)
		}
		if l.Size < 0 {
			return fmt.Errorf("%s layer %d (%s): negative size %d", p.what, i, l.Digest, l.Size)
		}
		if l.Digest.Algorithm != "sha256" {
			return fmt.Errorf("%s layer %d: unsupported digest algorithm %q", p.what, i, l.Digest.Algorithm)
		}
		total += l.Size
		if !p.store.Has(l.Digest) {
			need += l.Size
		}
		if need > p.limits.MaxPullBytes || need < 0 {
			return limitError("MaxPullBytes", p.limits.MaxPullBytes, fmt.Sprintf("pinned manifest naming more than %d bytes of blobs to fetch", need))
		}
	}
	var done int64
	if err := p.blob(m.Config, nil, nil, 0); err != nil {
		return err
	}
	for _, l := range m.Layers {
		if err := p.blob(l, p.progress, &done, total); err != nil {
			return err
		}
	}
	return nil
}

// blob fetches one blob by digest unless the store has it, reading at most
// its pinned size (plus one byte, to detect a longer body).
func (p *pull) blob(desc v1.Descriptor, progress Progress, done *int64, total int64) error {
	what := p.what + " blob " + desc.Digest.String()
	if p.store.Has(desc.Digest) {
		return nil
	}
	layer, err := p.puller.Layer(p.ctx, p.repo.Digest(desc.Digest.String()))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s: %w: the registry does not hold this blob (a layer descriptor's urls are never fetched): %v", what, ErrImageUnknown, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rc.Close()
	var r io.Reader = &budgetReader{r: rc, p: p, left: desc.Size + 1}
	if progress != nil {
		r = &progressReader{r: r, done: done, total: total, report: progress}
	}
	return p.store.putBlob(r, desc.Digest, desc.Size, what)
}

// budgetReader stops a blob one byte past its pinned size (putBlob then
// reports the size mismatch) and charges every byte to the pull's budget.
type budgetReader struct {
	r    io.Reader
	p    *pull
	left int64
}

func (b *budgetReader) Read(buf []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(buf)) > b.left {
		buf = buf[:b.left]
	}
	n, err := b.r.Read(buf)
	b.left -= int64(n)
	if b.p.fetched += int64(n); b.p.fetched > b.p.limits.MaxPullBytes {
		return n, limitError("MaxPullBytes", b.p.limits.MaxPullBytes, fmt.Sprintf("pull of %d bytes", b.p.fetched))
	}
	return n, err
}

// putImage copies img (a local image: a docker-save tarball, a test image)
// into the store through the verifying writer: every layer (compressed bytes,
// checked against the layer digest in the manifest), the config, then the
// manifest. Registry pulls do not use it (see Pull). It returns the manifest's descriptor. progress
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
