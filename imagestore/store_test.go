package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildIsDeterministic(t *testing.T) {
	src := testfix.BusyboxRootfs(t)
	a, err := openStore(t).Build(src, "test/busybox")
	if err != nil {
		t.Fatal(err)
	}
	// The same tree with other mtimes, copied elsewhere, packs to the same digest.
	copyDir := t.TempDir()
	run(t, "cp", "-a", src+"/.", copyDir)
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	filepath.Walk(copyDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			os.Chtimes(p, past, past)
		}
		return nil
	})
	s2 := openStore(t)
	b, err := s2.Build(copyDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("same tree, different digests: %s vs %s", a, b)
	}
	img, err := s2.Image(b)
	if err != nil {
		t.Fatal(err)
	}
	rootfs, err := s2.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(rootfs, "tmp"))
	if err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("/tmp in rootfs: %v %v, want 1777", fi.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(rootfs, "bin", "sh")); err != nil || target != "busybox" {
		t.Fatalf("bin/sh -> %q (%v), want busybox", target, err)
	}
	for _, mp := range []string{"work/code", "work/data", "work/out", "proc", "dev", "sys"} {
		if fi, err := os.Stat(filepath.Join(rootfs, mp)); err != nil || !fi.IsDir() {
			t.Errorf("mount point %s missing: %v", mp, err)
		}
	}
	// Unpacking again is a cache hit and returns the same directory.
	again, err := s2.Rootfs(img, nil)
	if err != nil || again != rootfs {
		t.Fatalf("second Rootfs: %s %v", again, err)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := osexec(name, args...)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

// tarBytes makes an uncompressed tar from headers; a regular file's body is its Linkname field.
func tarBytes(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = h.Linkname
			h.Linkname = ""
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	return buf.Bytes()
}

func file(name, body string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Linkname: body}
}

func imageOf(t *testing.T, s *Store, layers ...[]byte) *Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		var err error
		img, err = mutate.AppendLayers(img, static.NewLayer(l, types.OCIUncompressedLayer))
		if err != nil {
			t.Fatal(err)
		}
	}
	desc, err := s.putImage(img, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUnpackWhiteoutsLinksAndSymlinks(t *testing.T) {
	s := openStore(t)
	l1 := tarBytes(t,
		&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755},
		file("a/b", "b"), file("a/c", "c"), file("d", "d"),
		&tar.Header{Name: "e/", Typeflag: tar.TypeDir, Mode: 0o755},
		file("e/old", "old"),
		&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "a/c"},
		&tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "a/c"},
		&tar.Header{Name: "suid", Typeflag: tar.TypeReg, Linkname: "x", Mode: 0o4755},
	)
	l2 := tarBytes(t,
		file("a/.wh.b", ""), file(".wh.d", ""),
		file("e/new", "new"), file("e/.wh..wh..opq", ""),
		file("link", "now a file"),
	)
	rootfs, err := s.Rootfs(imageOf(t, s, l1, l2), nil)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Lstat(filepath.Join(rootfs, p)); return err == nil }
	for p, want := range map[string]bool{"a/b": false, "a/c": true, "d": false, "e/old": false, "e/new": true, "hard": true} {
		if exists(p) != want {
			t.Errorf("%s exists = %v, want %v", p, !want, want)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(rootfs, "link")); string(data) != "now a file" {
		t.Errorf("link replaced by file: got %q", data)
	}
	if fi, _ := os.Stat(filepath.Join(rootfs, "suid")); fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("setuid bit kept: %v", fi.Mode())
	}
}

func TestUnpackCannotEscapeRootfs(t *testing.T) {
	outside := t.TempDir()
	sentinel := filepath.Join(outside, "sentinel")
	cases := map[string][]byte{
		"dotdot": tarBytes(t, file("../../../../"+sentinel, "escaped")),
		"symlink-dir-absolute": tarBytes(t,
			&tar.Header{Name: "evil", Typeflag: tar.TypeSymlink, Linkname: outside},
			file("evil/sentinel", "escaped")),
		"symlink-dir-relative": tarBytes(t,
			&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../../../../../../../../" + outside},
			file("up/sentinel", "escaped")),
		"hardlink-outside": tarBytes(t,
			&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../../../../../" + sentinel}),
		"whiteout-outside": tarBytes(t, file("../../../../../"+outside+"/.wh.sentinel", "")),
	}
	for name, layer := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(sentinel, []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := openStore(t)
			rootfs, err := s.Rootfs(imageOf(t, s, layer), nil)
			data, rerr := os.ReadFile(sentinel)
			if rerr != nil || string(data) != "original" {
				t.Fatalf("file outside the rootfs changed: %q %v (unpack err %v)", data, rerr, err)
			}
			if err == nil {
				// Accepted entries must have landed inside the rootfs.
				t.Logf("unpacked to %s", rootfs)
			}
		})
	}
}

func TestUnpackRefusesTamperedLayer(t *testing.T) {
	s := openStore(t)
	img := imageOf(t, s, tarBytes(t, file("x", "hello")))
	blob := s.blobPath(img.Manifest.Layers[0].Digest)
	os.Chmod(blob, 0o644)
	data, _ := os.ReadFile(blob)
	data[len(data)-1] ^= 1
	os.WriteFile(blob, data, 0o644)
	if _, err := s.Rootfs(img, nil); !isMismatch(err) {
		t.Fatalf("tampered layer unpacked: %v", err)
	}
	if _, err := os.Stat(s.RootfsPath(img.ManifestDigest)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a rootfs was left for a tampered image: %v", err)
	}
	if err := s.Verify(img.Digest); !isMismatch(err) {
		t.Fatalf("Verify: %v", err)
	}
}

func isMismatch(err error) bool {
	var m *DigestMismatchError
	return errors.As(err, &m)
}

func TestImportLayoutArchiveAndDockerSave(t *testing.T) {
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()

	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	got, err := s.Import(dir, "example/random")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Digest != want {
		t.Fatalf("layout import: %+v, want %s", got, want)
	}

	// The same layout as a tar archive (OCI archive).
	archive := filepath.Join(t.TempDir(), "image.tar")
	run(t, "tar", "-C", dir, "-cf", archive, ".")
	got, err = openStore(t).Import(archive, "")
	if err != nil || len(got) != 1 || got[0].Digest != want {
		t.Fatalf("archive import: %+v %v", got, err)
	}

	// A docker-save tarball.
	tag, _ := name.NewTag("example/random:v1")
	saved := filepath.Join(t.TempDir(), "save.tar")
	if err := tarball.WriteToFile(saved, tag, img); err != nil {
		t.Fatal(err)
	}
	s3 := openStore(t)
	got, err = s3.Import(saved, "")
	if err != nil || len(got) != 1 {
		t.Fatalf("docker-save import: %+v %v", got, err)
	}
	if _, err := s3.Rootfs(mustImage(t, s3, got[0].Digest), nil); err != nil {
		t.Fatal(err)
	}

	// A layout whose blob was altered is refused.
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	for _, b := range blobs {
		fi, _ := os.Stat(b)
		if fi.Size() > 1000 { // a layer, not a manifest or config
			data, _ := os.ReadFile(b)
			data[100] ^= 0xff
			os.WriteFile(b, data, 0o644)
			break
		}
	}
	if _, err := openStore(t).Import(dir, ""); !isMismatch(err) {
		t.Fatalf("tampered layout imported: %v", err)
	}
}

func mustImage(t *testing.T, s *Store, d v1.Hash) *Image {
	t.Helper()
	img, err := s.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// registryWith serves go-containerregistry's in-memory registry on loopback,
// with tamper (may be nil) able to rewrite blob responses.
func registryWith(t *testing.T, tamper func(path string, body []byte) []byte) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tamper == nil || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
			reg.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		body := tamper(r.URL.Path, rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func pushRandom(t *testing.T, host string) (v1.Image, name.Digest) {
	t.Helper()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ref, err := name.NewDigest(host + "/lab/analysis@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return img, ref
}

func TestPullByDigestFromLoopbackRegistry(t *testing.T) {
	host := registryWith(t, nil)
	_, ref := pushRandom(t, host)
	s := openStore(t)
	ctx := context.Background()
	var seen, total int64
	img, pulled, err := s.Resolve(ctx, ref.String(), PullOptions{AllowHTTP: true, Progress: func(d, t int64) { seen, total = d, t }})
	if err != nil || !pulled {
		t.Fatalf("resolve: pulled=%v err=%v", pulled, err)
	}
	if seen == 0 || seen != total {
		t.Fatalf("pull progress ended at %d of %d", seen, total)
	}
	if img.Digest.String() != ref.DigestStr() {
		t.Fatalf("digest %s, want %s", img.Digest, ref.DigestStr())
	}
	if _, err := s.Rootfs(img, nil); err != nil {
		t.Fatal(err)
	}
	// Second time: the local store answers, no registry needed.
	_, pulled, err = s.Resolve(ctx, ref.String(), PullOptions{Offline: true})
	if err != nil || pulled {
		t.Fatalf("second resolve: pulled=%v err=%v", pulled, err)
	}
}

func TestPullRefusesTamperedBlob(t *testing.T) {
	host := registryWith(t, func(path string, body []byte) []byte {
		if len(body) > 1000 { // layers, not the config
			body = bytes.Clone(body)
			body[len(body)/2] ^= 0xff
		}
		return body
	})
	_, ref := pushRandom(t, host)
	s := openStore(t)
	_, _, err := s.Resolve(context.Background(), ref.String(), PullOptions{AllowHTTP: true})
	if err == nil {
		t.Fatal("tampered blob accepted")
	}
	if !strings.Contains(err.Error(), "mismatch") && !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("error does not say the digest mismatched: %v", err)
	}
	h, _ := ParseDigest(ref.DigestStr())
	if _, err := s.Image(h); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tampered image is in the store: %v", err)
	}
}

func TestResolveRefusesTagsAndPlainHTTP(t *testing.T) {
	host := registryWith(t, nil)
	_, ref := pushRandom(t, host)
	s := openStore(t)
	ctx := context.Background()
	if _, _, err := s.Resolve(ctx, host+"/lab/analysis:latest", PullOptions{AllowHTTP: true}); !errors.Is(err, ErrNoDigest) {
		t.Fatalf("tag without digest: %v", err)
	}
	if _, _, err := s.Resolve(ctx, ref.String(), PullOptions{}); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Fatalf("plain-http registry without AllowHTTP: %v", err)
	}
	missing := host + "/lab/analysis@sha256:" + strings.Repeat("ab", 32)
	if _, _, err := s.Resolve(ctx, missing, PullOptions{AllowHTTP: true}); !errors.Is(err, ErrImageUnknown) {
		t.Fatalf("unknown digest: %v", err)
	}
}
