package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PushOptions say how to reach the registry an image is published to.
type PushOptions struct {
	// Transport carries every request (runner.Policy.Transport: the fetch
	// policy and the trusted CAs); nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Keychain finds credentials for the registry; nil means
	// authn.DefaultKeychain (the Docker config file as `docker login` and
	// `podman login` write it: $DOCKER_CONFIG/config.json,
	// ~/.docker/config.json, $REGISTRY_AUTH_FILE and podman's auth.json).
	Keychain authn.Keychain
	// AllowHTTP admits plain-http registries (loopback, private addresses).
	AllowHTTP bool
}

// Push publishes the store image d to dst (REGISTRY/REPOSITORY[:TAG]) and
// returns the pushed reference REGISTRY/REPOSITORY@<d>: the same manifest
// bytes, so the same digest, that a manifest names and a runner pulls. A
// tag, when given, is set too; without one only the digest is pushed (a
// registry needs no tag to serve a manifest by digest). d must be an image
// manifest in the store (an index is refused: push the platform image).
func (s *Store) Push(ctx context.Context, d v1.Hash, dst string, o PushOptions) (name.Digest, error) {
	if strings.Contains(dst, "@") {
		return name.Digest{}, fmt.Errorf("push destination %q: give REGISTRY/REPOSITORY[:TAG]; the digest is the image's", dst)
	}
	tag, err := name.NewTag(dst, name.StrictValidation)
	if err != nil {
		if tag, err = name.NewTag(dst); err != nil {
			return name.Digest{}, fmt.Errorf("push destination %q: %w", dst, err)
		}
	}
	if tag.Context().Registry.Scheme() == "http" && !o.AllowHTTP {
		return name.Digest{}, fmt.Errorf("push to %s: a loopback or private registry is reached over plain http: pass --allow-private-urls", tag.Context().RegistryStr())
	}
	img, err := s.Image(d)
	if err != nil {
		return name.Digest{}, err
	}
	if img.ManifestDigest != d {
		return name.Digest{}, fmt.Errorf("%s is an index: push the platform image %s", d, img.ManifestDigest)
	}
	v1img, err := s.v1Image(img)
	if err != nil {
		return name.Digest{}, err
	}
	opts := remoteOptions(ctx, o)
	ref := name.Reference(tag.Context().Digest(d.String()))
	if strings.Contains(dst[strings.LastIndex(dst, "/")+1:], ":") {
		ref = tag
	}
	if err := remote.Write(ref, v1img, opts...); err != nil {
		return name.Digest{}, pushError(tag.Context().Registry, o.Keychain, err)
	}
	return tag.Context().Digest(d.String()), nil
}

func remoteOptions(ctx context.Context, o PushOptions) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithJobs(4)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// pushError names the fix for the registry's usual refusals: with no
// credentials for the registry in the keychain, that none were found and
// where they were looked for; with some, that the registry refused them.
func pushError(reg name.Registry, kc authn.Keychain, err error) error {
	host := reg.RegistryStr()
	var te *transport.Error
	if !errors.As(err, &te) || (te.StatusCode != http.StatusUnauthorized && te.StatusCode != http.StatusForbidden) {
		return fmt.Errorf("push to %s: %w", host, err)
	}
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if a, kerr := kc.Resolve(reg); kerr == nil && a == authn.Anonymous {
		return fmt.Errorf("push to %s: the registry needs credentials (HTTP %d); none found for %s in %s: log in with `docker login %s` or `podman login %s`: %w",
			host, te.StatusCode, host, DockerConfigPath(), host, host, err)
	}
	return fmt.Errorf("push to %s: the registry refused the credentials (HTTP %d): log in again with `docker login %s` or `podman login %s` (%s): %w", host, te.StatusCode, host, host, DockerConfigPath(), err)
}

// DockerConfigPath is the Docker config file authn.DefaultKeychain reads
// first: $DOCKER_CONFIG/config.json, else ~/.docker/config.json.
func DockerConfigPath() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return filepath.Join(d, "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "~/.docker/config.json"
	}
	return filepath.Join(home, ".docker", "config.json")
}

// ErrPlainHTTP is wrapped by Pullable for a registry reached over plain
// http (a loopback or private address) without AllowHTTP.
var ErrPlainHTTP = errors.New("would be reached over plain http")

// ErrNeedsCredentials is wrapped by Pullable when the registry answers an
// anonymous client 401 or 403: runners pull anonymously, so the
// repository must be public-read.
var ErrNeedsCredentials = errors.New("the registry refuses anonymous clients")

// anonymousRefusal wraps ErrNeedsCredentials around a registry's 401 or
// 403 to an anonymous client (Pull, Pullable), with the fix; any other
// error is returned as it is.
func anonymousRefusal(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w (HTTP %d): runners pull anonymously, so make the repository public-read: %v", ErrNeedsCredentials, te.StatusCode, err)
	}
	return err
}

// Pullable reports whether the registry of ref (NAME@sha256:…) serves its
// manifest by digest to an anonymous client: nil, or why not. It asks for
// the manifest only (a HEAD), never a layer.
func Pullable(ctx context.Context, ref string, o PullOptions) error {
	dig, err := ParseRef(ref)
	if err != nil {
		return err
	}
	if dig.Context().Registry.Scheme() == "http" && !o.AllowHTTP {
		return fmt.Errorf("registry %s: %w", dig.Context().RegistryStr(), ErrPlainHTTP)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(authn.Anonymous)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	desc, err := remote.Head(dig, opts...)
	if err != nil {
		return anonymousRefusal(err)
	}
	if desc.Digest.String() != dig.DigestStr() {
		return fmt.Errorf("registry %s answered digest %s for %s", dig.Context().RegistryStr(), desc.Digest, dig.DigestStr())
	}
	return nil
}

// v1Image is a go-containerregistry view of a store image whose blobs are
// read from the store as they are (compressed layers are sent unchanged).
func (s *Store) v1Image(img *Image) (v1.Image, error) {
	raw, err := s.readBlob(img.ManifestDigest)
	if err != nil {
		return nil, err
	}
	cfg, err := s.readBlob(img.Manifest.Config.Digest)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&storeImage{s: s, img: img, raw: raw, cfg: cfg})
}

type storeImage struct {
	s        *Store
	img      *Image
	raw, cfg []byte
}

func (i *storeImage) RawConfigFile() ([]byte, error) { return i.cfg, nil }
func (i *storeImage) RawManifest() ([]byte, error)   { return i.raw, nil }
func (i *storeImage) MediaType() (types.MediaType, error) {
	if i.img.Manifest.MediaType == "" {
		return types.OCIManifestSchema1, nil
	}
	return i.img.Manifest.MediaType, nil
}

func (i *storeImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range i.img.Manifest.Layers {
		if l.Digest == h {
			return &storeLayer{s: i.s, desc: l}, nil
		}
	}
	if h == i.img.Manifest.Config.Digest {
		return &storeLayer{s: i.s, desc: i.img.Manifest.Config}, nil
	}
	return nil, fmt.Errorf("blob %s is not in image %s", h, i.img.ManifestDigest)
}

type storeLayer struct {
	s    *Store
	desc v1.Descriptor
}

func (l *storeLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *storeLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *storeLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l *storeLayer) Compressed() (io.ReadCloser, error) {
	f, err := os.Open(l.s.blobPath(l.desc.Digest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("layer %s: %w", l.desc.Digest, ErrNotFound)
	}
	return f, err
}
