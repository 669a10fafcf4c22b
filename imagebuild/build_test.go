package imagebuild

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/netpolicy"
	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// busyboxStore is a store holding the busybox fixture image; it returns
// the store and the image's NAME@DIGEST.
func busyboxStore(t *testing.T) (*imagestore.Store, string) {
	t.Helper()
	testfix.Need(t, true, "buildah", "runc", "busybox")
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.BuildWith(testfix.BusyboxRootfs(t), "lab/busybox", imagestore.BuildOptions{Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, "lab/busybox@" + d.String()
}

func buildText(t *testing.T, s *imagestore.Store, text string, egress ...string) (Result, error) {
	t.Helper()
	ctx := t.TempDir()
	os.WriteFile(filepath.Join(ctx, "note.txt"), []byte("from the package\n"), 0o644)
	var log strings.Builder
	res, err := Build(context.Background(), Options{Store: s, Ref: "lab/built", Context: ctx, Containerfile: []byte(text),
		Egress: egress, Rules: netpolicy.Rules{AllowPrivate: true}, WorkDir: filepath.Join(t.TempDir(), "buildah"), Log: &log})
	if err != nil {
		t.Logf("buildah output:\n%s", log.String())
	}
	return res, err
}

// TestBuildFromStoreImageIsReproducibleAndReusesBase builds a Containerfile
// FROM a store image whose RUN fetches a file through the egress proxy,
// twice (each with fresh buildah storage): one digest, the base layer
// reused as it is, one new layer.
func TestBuildFromStoreImageIsReproducibleAndReusesBase(t *testing.T) {
	s, base := busyboxStore(t)
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served "+r.URL.Path+"\n") }))
	defer mirror.Close()
	text := "FROM " + base + "\nCOPY note.txt /opt/note.txt\nRUN wget -q -O /opt/fetched " + mirror.URL + "/pkg && mkdir -p /var/log/x && echo noise > /var/log/x/log && echo $SOURCE_DATE_EPOCH > /opt/epoch\nENV GREETING=hello\n"
	r1, err := buildText(t, s, text, mirror.URL)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := buildText(t, s, text, mirror.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Digest != r2.Digest || r1.Layers != 1 {
		t.Fatalf("two builds: %s and %s, %d new layers", r1.Digest, r2.Digest, r1.Layers)
	}
	img, err := s.Image(r1.Digest)
	if err != nil {
		t.Fatal(err)
	}
	bimg, _, _ := s.Resolve(context.Background(), base, imagestore.PullOptions{Offline: true})
	if len(img.Manifest.Layers) != 2 || img.Manifest.Layers[0].Digest != bimg.Manifest.Layers[0].Digest || img.Manifest.Layers[0].MediaType != bimg.Manifest.Layers[0].MediaType {
		t.Fatalf("base layer not reused as it is: %+v vs %+v", img.Manifest.Layers, bimg.Manifest.Layers)
	}
	if len(img.Config.History) != 0 || img.Config.Created.Unix() != 0 {
		t.Fatalf("config keeps build metadata: %+v", img.Config)
	}
	root, err := s.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"opt/fetched": "served /pkg\n", "opt/note.txt": "from the package\n", "opt/epoch": "0\n"} {
		if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "var/log/x/log")); err == nil {
		t.Error("var/log was not trimmed from the new layer")
	}
}

// TestBuildStepReachingAnUnlistedHostIsRefused: a RUN that asks the proxy
// for a host outside the egress list fails naming the rule, and one that
// dials directly finds no route out of the build's network namespace.
func TestBuildStepReachingAnUnlistedHostIsRefused(t *testing.T) {
	s, base := busyboxStore(t)
	listed := httptest.NewServer(http.NotFoundHandler())
	defer listed.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") }))
	defer other.Close()
	_, err := buildText(t, s, "FROM "+base+"\nRUN wget -q -O /x "+other.URL+"/secret\n", listed.URL)
	if err == nil || !strings.Contains(err.Error(), EgressRule) || !strings.Contains(err.Error(), strings.TrimPrefix(other.URL, "http://")) {
		t.Fatalf("unlisted host: %v", err)
	}
	// Without the proxy: the host's loopback is not this namespace's.
	_, err = buildText(t, s, "FROM "+base+"\nRUN env -u http_proxy -u HTTP_PROXY wget -q -T 5 -O /x "+other.URL+"/secret\n", listed.URL)
	if err == nil {
		t.Fatal("a build step reached the host's loopback without the proxy")
	}
}

func TestBuildRefusesBeforeBuilding(t *testing.T) {
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(context.Background(), Options{Store: s, Context: t.TempDir(), Containerfile: []byte("FROM debian:bookworm\n")})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "FROM by digest only") {
		t.Fatalf("tag in FROM: %v", err)
	}
}

// TestBuildOnVfsStorageGivesTheSameDigest: where overlay is not supported
// (storageDriver falls back to vfs) the result is the same image.
func TestBuildOnVfsStorageGivesTheSameDigest(t *testing.T) {
	s, base := busyboxStore(t)
	text := "FROM " + base + "\nRUN mkdir -p /opt && echo vfs > /opt/x\n"
	build := func(driver string) Result {
		work := filepath.Join(t.TempDir(), "buildah")
		os.MkdirAll(work, 0o755)
		if driver != "" {
			os.WriteFile(filepath.Join(work, "driver"), []byte(driver+"\n"), 0o644)
		}
		res, err := Build(context.Background(), Options{Store: s, Context: t.TempDir(), Containerfile: []byte(text), WorkDir: work})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if a, b := build(""), build("vfs"); a.Digest != b.Digest {
		t.Fatalf("overlay %s, vfs %s", a.Digest, b.Digest)
	}
}

// TestBuildOverItsTimeIsStopped: a step that outlives the build's time
// bound is killed and the build fails naming the bound.
func TestBuildOverItsTimeIsStopped(t *testing.T) {
	s, base := busyboxStore(t)
	start := time.Now()
	_, err := Build(context.Background(), Options{Store: s, Context: t.TempDir(), Containerfile: []byte("FROM " + base + "\nRUN sleep 120\n"),
		WorkDir: filepath.Join(t.TempDir(), "buildah"), Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "longer than 5s") {
		t.Fatalf("over time: %v", err)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Fatalf("stopped after %s", took)
	}
}

// TestBuildFromAnImageNotInTheStoreSaysWhereToGetIt: a FROM (or --base)
// image that is neither in the store nor pullable is reported with the
// store's directory and the three ways to get it, not only the pull's
// network error.
func TestBuildFromAnImageNotInTheStoreSaysWhereToGetIt(t *testing.T) {
	testfix.Need(t, true, "buildah")
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ref := "127.0.0.1:1/lab/base@sha256:" + strings.Repeat("a", 64)
	_, err = Build(context.Background(), Options{Store: s, Context: t.TempDir(), Containerfile: []byte("FROM " + ref + "\n"),
		WorkDir: filepath.Join(t.TempDir(), "buildah"), Log: io.Discard})
	for _, want := range []string{"not in the store " + s.Dir(), "dotlab image list --cache " + s.Dir(), "pass the --cache that holds it", "examples/images/", "dotlab image pull " + ref} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
