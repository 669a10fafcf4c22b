package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/runner"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tarDir packs a directory (the busybox rootfs) as an uncompressed layer.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return buf.Bytes()
}

// hostileLayer is a tar layer of raw headers (names not cleaned).
func hostileLayer(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := []byte{}
		if h.Typeflag == tar.TypeReg {
			body = []byte("x")
		}
		h.Size = int64(len(body))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	return buf.Bytes()
}

// gzipBomb is a gzip layer holding one file of n zero bytes.
func gzipBomb(t *testing.T, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: n})
	zero := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(zero)) {
		tw.Write(zero[:min(int64(len(zero)), left)])
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// pushImage pushes busybox plus the extra layers to the registry at host
// and returns the pinned reference.
func pushImage(t *testing.T, host, repo string, extra ...mutate.Addendum) string {
	t.Helper()
	base := static.NewLayer(tarDir(t, testfix.BusyboxRootfs(t)), types.OCIUncompressedLayer)
	adds := append([]mutate.Addendum{{Layer: base, MediaType: types.OCIUncompressedLayer}}, extra...)
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ref, err := name.NewDigest(host + "/" + repo + "@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

func layerOf(data []byte, mt types.MediaType) mutate.Addendum {
	return mutate.Addendum{Layer: static.NewLayer(data, mt), MediaType: mt}
}

// TestHostileImages (kinds 2, 5, 6): images pulled from a real registry on
// loopback. Hostile layer entries and decompression bombs refuse the image:
// spec_issue (the claim cannot be executed as written, on any runner), not
// "no outcome"; a layer that only exists at its descriptor's urls is never
// fetched from there (the canary sees no connection) and the claim is
// spec_issue; a benign image from the same registry reproduces.
func TestHostileImages(t *testing.T) {
	f := newFixture(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	c := newCanary(t)
	sentinelDir := t.TempDir()
	sentinel := filepath.Join(sentinelDir, "etc-sentinel")
	os.WriteFile(sentinel, []byte("host"), 0o644)

	tarLayer := func(h ...*tar.Header) mutate.Addendum {
		return layerOf(hostileLayer(t, h...), types.OCIUncompressedLayer)
	}
	foreign := mutate.Addendum{Layer: static.NewLayer(hostileLayer(t, &tar.Header{Name: "etc/hello", Typeflag: tar.TypeReg}), types.DockerForeignLayer),
		MediaType: types.DockerForeignLayer, URLs: []string{"http://localhost:" + strings.Split(c.addr(), ":")[1] + "/v1.43/containers/create", "http://" + c.addr() + "/blob"}}
	cases := map[string]struct {
		layer mutate.Addendum
		note  string
	}{
		"bare whiteout":      {tarLayer(&tar.Header{Name: "etc/.wh.", Typeflag: tar.TypeReg}), "whiteout"},
		"dotdot whiteout":    {tarLayer(&tar.Header{Name: "etc/.wh...", Typeflag: tar.TypeReg}), "whiteout"},
		"dotdot entry":       {tarLayer(&tar.Header{Name: "../../" + sentinel, Typeflag: tar.TypeReg}), `".."`},
		"pax dotdot":         {tarLayer(&tar.Header{Name: strings.Repeat("d/", 60) + strings.Repeat("../", 62) + "x", Typeflag: tar.TypeReg, Format: tar.FormatPAX}), `".."`},
		"symlink dot":        {tarLayer(&tar.Header{Name: ".", Typeflag: tar.TypeSymlink, Linkname: "/"}), "root"},
		"hard link out":      {tarLayer(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../" + sentinel}), "hard link"},
		"symlink then write": {tarLayer(&tar.Header{Name: "esc", Typeflag: tar.TypeSymlink, Linkname: sentinelDir}, &tar.Header{Name: "esc/etc-sentinel", Typeflag: tar.TypeReg}), "symbolic link"},
		"gzip bomb":          {layerOf(gzipBomb(t, 256<<20), types.OCILayer), "compression"},
		"foreign layer urls": {foreign, "registry"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := f.manifest(f.fileURL(), meanScript)
			m.Environment.Image = pushImage(t, host, "hostile/"+strings.ReplaceAll(name, " ", "-"), tc.layer)
			// A runner with an empty image store: the image is pulled.
			r2, err := runner.New(t.TempDir(), f.r.Runtime, runner.LocalPolicy("/"), f.r.Clock)
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := mustRerun(t, r2, m, dotlab.OutcomeSpecIssue, "environment.image")
			t.Logf("note: %s", rec.Body.Notes)
			if !strings.Contains(strings.ToLower(rec.Body.Notes), tc.note) {
				t.Errorf("note does not name the rule (%q): %s", tc.note, rec.Body.Notes)
			}
			if entries, _ := os.ReadDir(filepath.Join(r2.Store.Dir(), "rootfs", "sha256")); len(entries) != 0 {
				t.Errorf("rootfs cache holds %d entries after a refusal", len(entries))
			}
			c.assertUntouched(t)
			hostUntouched(t, r2, sentinel, []byte("host"))
		})
	}
	t.Run("benign image from the same registry", func(t *testing.T) {
		m := f.manifest(f.fileURL(), meanScript)
		m.Environment.Image = pushImage(t, host, "benign/busybox")
		r, err := runner.New(t.TempDir(), f.r.Runtime, runner.LocalPolicy("/"), f.r.Clock)
		if err != nil {
			t.Fatal(err)
		}
		mustRerun(t, r, m, dotlab.OutcomeReproduced)
	})
}
