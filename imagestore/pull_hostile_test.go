package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// canary is a TCP listener on loopback that counts the connections it is offered.
type canary struct {
	addr string
	hits atomic.Int64
}

func newCanary(t *testing.T) *canary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &canary{addr: ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.hits.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *canary) assertUntouched(t *testing.T) {
	t.Helper()
	if n := c.hits.Load(); n != 0 {
		t.Errorf("the canary listener %s saw %d connections", c.addr, n)
	}
}

// pushWithURLs pushes an image whose one layer descriptor carries urls (and
// media type mt) to host and returns its pinned reference.
func pushWithURLs(t *testing.T, host string, mt types.MediaType, urls []string) name.Digest {
	t.Helper()
	layer := static.NewLayer(tarBytes(t, file("etc/hello", "hello")), mt)
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, URLs: urls, MediaType: mt})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ref, err := name.NewDigest(host + "/lab/foreign@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// A hostile-image finding (docs/threat-model.md): a layer descriptor's urls are never contacted, neither
// for a foreign layer the registry does not hold (the pull fails) nor for a
// layer it does hold (the pull succeeds from the registry).
func TestPullNeverFetchesDescriptorURLs(t *testing.T) {
	c := newCanary(t)
	_, port, _ := net.SplitHostPort(c.addr)
	urls := []string{"http://localhost:" + port + "/v1.43/containers/create", "http://" + c.addr + "/blob", "https://" + c.addr + "/blob"}
	host := registryWith(t, nil)

	t.Run("foreign-layer-not-in-registry", func(t *testing.T) {
		ref := pushWithURLs(t, host, types.DockerForeignLayer, urls)
		s := openStore(t)
		_, _, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true})
		if !errors.Is(err, ErrImageUnknown) {
			t.Fatalf("pull of a layer the registry lacks: %v", err)
		}
		c.assertUntouched(t)
		h, _ := ParseDigest(ref.DigestStr())
		if _, err := s.Image(h); !errors.Is(err, ErrNotFound) {
			t.Fatalf("image recorded after a failed pull: %v", err)
		}
		assertNoLeftovers(t, s)
	})
	t.Run("layer-in-registry-with-urls", func(t *testing.T) {
		ref := pushWithURLs(t, host, types.OCIUncompressedLayer, urls)
		s := openStore(t)
		img, pulled, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true})
		if err != nil || !pulled {
			t.Fatalf("pull: %v", err)
		}
		if _, err := s.Rootfs(img, nil); err != nil {
			t.Fatal(err)
		}
		c.assertUntouched(t)
	})
}

// countingRegistry serves a registry on loopback and counts blob GETs.
func countingRegistry(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var blobs atomic.Int64
	host := registryWith(t, func(path string, body []byte) []byte {
		blobs.Add(1)
		return body
	})
	return host, &blobs
}

func TestPullRefusesMoreThanMaxPullBytes(t *testing.T) {
	host, blobs := countingRegistry(t)
	_, ref := pushRandom(t, host) // two layers of ~2.5 KB compressed
	blobs.Store(0)
	s := openStore(t)
	s.Limits = Limits{MaxPullBytes: 4096}
	_, _, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true})
	if !errors.Is(err, ErrUnsafeImage) || !strings.Contains(err.Error(), "Limits.MaxPullBytes = 4096") {
		t.Fatalf("pull over the byte limit: %v", err)
	}
	if n := blobs.Load(); n != 0 {
		t.Errorf("%d blobs fetched although the pinned sizes already exceed the limit", n)
	}
	h, _ := ParseDigest(ref.DigestStr())
	if _, err := s.Image(h); !errors.Is(err, ErrNotFound) {
		t.Fatalf("image recorded after a refused pull: %v", err)
	}
	assertNoLeftovers(t, s)

	// The same image under the default limit pulls.
	if _, _, err := openStore(t).Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true}); err != nil {
		t.Fatal(err)
	}
}

// A registry that sends more than a blob's pinned size is read no further
// than one byte past it.
func TestPullReadsNoBlobPastItsPinnedSize(t *testing.T) {
	host := registryWith(t, func(path string, body []byte) []byte {
		if len(body) > 1000 {
			return append(body, make([]byte, 8<<20)...)
		}
		return body
	})
	img, ref := pushRandom(t, host)
	var total int64
	layers, _ := img.Layers()
	for _, l := range layers {
		n, _ := l.Size()
		total += n
	}
	var seen int64
	s := openStore(t)
	_, _, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true, Progress: func(d, _ int64) { seen = d }})
	if err == nil {
		t.Fatal("blob with trailing bytes accepted")
	}
	if seen > total+int64(len(layers)) {
		t.Fatalf("read %d layer bytes for %d pinned", seen, total)
	}
	assertNoLeftovers(t, s)
}

// tokenRegistry serves the in-memory registry behind distribution token auth:
// 401 with a Bearer challenge naming a token server on another port, and
// blob GETs redirected to a third server (a CDN).
func tokenRegistry(t *testing.T) (host string, tokens, cdn *atomic.Int64) {
	t.Helper()
	tokens, cdn = new(atomic.Int64), new(atomic.Int64)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens.Add(1)
		json.NewEncoder(w).Encode(map[string]string{"token": "letmein"})
	}))
	t.Cleanup(tokenSrv.Close)
	// go-containerregistry refuses a realm that is a loopback IP literal
	// unless it is the registry's own host:port; a name is what real
	// registries announce (auth.docker.io, ghcr.io/token).
	realm := strings.Replace(tokenSrv.URL, "127.0.0.1", "localhost", 1)
	cdnSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cdn.Add(1)
		reg.ServeHTTP(w, r) // serves the blob path it was redirected to
	}))
	t.Cleanup(cdnSrv.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer letmein" {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="test",scope="repository:lab/analysis:pull"`, realm))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, cdnSrv.URL+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), tokens, cdn
}

// The hosts a real pull needs besides the registry, its announced token
// realm and a blob redirect to a CDN, stay reachable through the guard.
func TestPullFollowsTokenRealmAndRedirects(t *testing.T) {
	host, tokens, cdn := tokenRegistry(t)
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(tarBytes(t, file("x", "y")), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ref, _ := name.NewDigest(host + "/lab/analysis@" + d.String())
	// Push with a bearer token the registry accepts.
	if err := remote.Write(ref, img, remote.WithTransport(bearer{http.DefaultTransport})); err != nil {
		t.Fatal(err)
	}
	tokens.Store(0)
	cdn.Store(0)
	s := openStore(t)
	got, _, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rootfs(got, nil); err != nil {
		t.Fatal(err)
	}
	if tokens.Load() == 0 || cdn.Load() == 0 {
		t.Fatalf("token server hit %d times, CDN %d: the test did not exercise realm and redirect", tokens.Load(), cdn.Load())
	}
}

type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer letmein")
	return b.next.RoundTrip(r)
}

func TestRegistryGuard(t *testing.T) {
	c := newCanary(t)
	var realmHost string
	regSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.Header().Set("WWW-Authenticate", `Basic realm="Registry Realm", Bearer realm="http://`+realmHost+`/token",service="x"`)
			w.WriteHeader(http.StatusUnauthorized)
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			var n int
			fmt.Sscanf(r.URL.Path, "/hop/%d", &n)
			if n == 0 {
				io.WriteString(w, "arrived")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
		case r.URL.Path == "/to-canary":
			http.Redirect(w, r, "http://"+c.addr+"/", http.StatusFound)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer regSrv.Close()
	realmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "token") }))
	defer realmSrv.Close()
	realmHost = strings.TrimPrefix(realmSrv.URL, "http://")
	reg := strings.TrimPrefix(regSrv.URL, "http://")

	client := &http.Client{Transport: newRegistryGuard(reg, "http", http.DefaultTransport)}
	get := func(u string) (string, error) {
		resp, err := client.Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	if _, err := get("http://" + c.addr + "/blob"); !errors.Is(err, ErrUnsafeImage) {
		t.Errorf("request to a foreign host: %v", err)
	}
	if _, err := get(realmSrv.URL + "/token"); !errors.Is(err, ErrUnsafeImage) {
		t.Errorf("realm reached before the registry named it: %v", err)
	}
	if body, err := get(regSrv.URL + "/v2/"); err != nil {
		t.Fatalf("registry ping: %v %q", err, body)
	}
	if body, err := get(realmSrv.URL + "/token"); err != nil || body != "token" {
		t.Errorf("announced realm: %q %v", body, err)
	}
	if body, err := get(regSrv.URL + "/hop/5"); err != nil || body != "arrived" {
		t.Errorf("5 redirect hops: %q %v", body, err)
	}
	if _, err := get(regSrv.URL + "/hop/6"); !errors.Is(err, ErrUnsafeImage) {
		t.Errorf("6 redirect hops: %v", err)
	}
	// A redirect hop is allowed to leave the registry's host (a CDN); the
	// caller's policy transport decides whether its address may be dialled.
	// Here the next transport is the default one, so the hop is made.
	if _, err := get(regSrv.URL + "/to-canary"); err == nil || errors.Is(err, ErrUnsafeImage) {
		t.Errorf("redirect hop: %v", err)
	}
	c.hits.Store(0)

	// https registry: a plain-http request, or a redirect down to http, is refused.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+c.addr+"/", http.StatusFound)
	}))
	defer tlsSrv.Close()
	tlsClient := &http.Client{Transport: newRegistryGuard(strings.TrimPrefix(tlsSrv.URL, "https://"), "https", tlsSrv.Client().Transport)}
	if _, err := tlsClient.Get(tlsSrv.URL + "/v2/"); !errors.Is(err, ErrUnsafeImage) || !strings.Contains(err.Error(), "scheme") {
		t.Errorf("https to http redirect: %v", err)
	}
	if _, err := tlsClient.Get("http://" + strings.TrimPrefix(tlsSrv.URL, "https://") + "/v2/"); !errors.Is(err, ErrUnsafeImage) {
		t.Errorf("plain http to an https registry: %v", err)
	}
	c.assertUntouched(t)
}

func TestAuthParams(t *testing.T) {
	for h, want := range map[string][]string{
		`Bearer realm="https://auth.docker.io/token",service="registry.docker.io"`: {"https://auth.docker.io/token"},
		`Basic realm="Registry Realm", Bearer realm=https://ghcr.io/token`:         {"Registry Realm", "https://ghcr.io/token"},
		`Bearer service="x",myrealm="https://evil/",realm="https://a\"b/"`:         {`https://a"b/`},
		`Bearer REALM="https://UPPER/t"`:                                           {"https://UPPER/t"},
		`Bearer`:                                                                   nil,
	} {
		if got := authParams(h, "realm"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("authParams(%s) = %q, want %q", h, got, want)
		}
	}
}

// An index is pulled with only its linux/GOARCH child, all by digest.
func TestPullIndexByDigest(t *testing.T) {
	host, _ := countingRegistry(t)
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(tarBytes(t, file("arch", runtime.GOARCH)), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	other, err := mutate.AppendLayers(empty.Image, static.NewLayer(tarBytes(t, file("arch", "other")), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "other"}}},
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}})
	d, _ := idx.Digest()
	ref, _ := name.NewDigest(host + "/lab/multi@" + d.String())
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	got, _, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	child, _ := img.Digest()
	if got.Digest != d || got.ManifestDigest != child {
		t.Fatalf("resolved %s / %s, want index %s / child %s", got.Digest, got.ManifestDigest, d, child)
	}
	otherDigest, _ := other.Digest()
	if s.Has(otherDigest) {
		t.Errorf("the other platform's manifest was fetched")
	}
	rootfs, err := s.Rootfs(got, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(rootfs + "/arch"); string(b) != runtime.GOARCH {
		t.Fatalf("rootfs of the wrong platform: %q", b)
	}
	entries, _ := s.List()
	if len(entries) != 1 || entries[0].Digest != d.String() || !types.MediaType(entries[0].MediaType).IsIndex() {
		t.Fatalf("index.json entries %+v", entries)
	}
}
