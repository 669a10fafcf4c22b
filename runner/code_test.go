package runner

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"io"
	"log"
	mrand "math/rand"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/safefs"
	git "github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestCheckoutOverHTTPAndLocal(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "lab")
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	old := testfix.Commit(t, r, dir, map[string]string{"analysis.sh": "v1", "lib/util.sh": "u"})
	tip := testfix.Commit(t, r, dir, map[string]string{"analysis.sh": "v2"})
	base := testfix.GitHTTP(t, root)
	p := LocalPolicy("/")
	for _, repoURL := range []string{base + "/lab/.git", dir, "file://" + dir} {
		for commit, want := range map[string]string{old: "v1", tip: "v2"} {
			dst := t.TempDir()
			if err := checkoutCommit(context.Background(), p, repoURL, commit, dst, t.TempDir(), CodeLimits()); err != nil {
				t.Fatalf("%s at %s: %v", repoURL, commit, err)
			}
			got, _ := os.ReadFile(filepath.Join(dst, "analysis.sh"))
			if string(got) != want {
				t.Fatalf("%s at %s: analysis.sh = %q, want %q", repoURL, commit, got, want)
			}
			if _, err := os.Stat(filepath.Join(dst, ".git")); err == nil {
				t.Fatalf("checkout contains .git")
			}
		}
		missing := strings.Repeat("cd", 20)
		if err := checkoutCommit(context.Background(), p, repoURL, missing, t.TempDir(), t.TempDir(), CodeLimits()); !errors.Is(err, ErrNoCommit) {
			t.Fatalf("%s: missing commit: %v", repoURL, err)
		}
	}
	if err := checkoutCommit(context.Background(), p, base+"/nope/.git", tip, t.TempDir(), t.TempDir(), CodeLimits()); !errors.Is(err, ErrNoRepository) {
		t.Fatalf("missing repository: %v", err)
	}
	// The strict policy refuses both the plain-http loopback forge and local paths.
	for _, u := range []string{base + "/lab/.git", strings.Replace(base, "http://", "https://", 1) + "/lab/.git", dir} {
		if err := checkoutCommit(context.Background(), Policy{}, u, tip, t.TempDir(), t.TempDir(), CodeLimits()); !errors.Is(err, ErrRefused) {
			t.Fatalf("strict policy, %s: %v", u, err)
		}
	}
}

// tarGz builds a tar.gz from entries (header, body).
func tarGz(t *testing.T, entries ...tarEntry) string {
	t.Helper()
	var tgz bytes.Buffer
	zw := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		e.h.Size = int64(len(e.body))
		if e.h.Typeflag == tar.TypeSymlink || e.h.Typeflag == tar.TypeDir {
			e.h.Size = 0
		}
		if e.h.Mode == 0 {
			e.h.Mode = 0o644
		}
		if err := tw.WriteHeader(e.h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "code.tar.gz")
	os.WriteFile(p, tgz.Bytes(), 0o644)
	return p
}

type tarEntry struct {
	h    *tar.Header
	body string
}

func zipOf(t *testing.T, names ...string) string {
	t.Helper()
	var zbuf bytes.Buffer
	zwr := zip.NewWriter(&zbuf)
	for _, n := range names {
		w, err := zwr.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("x"))
	}
	zwr.Close()
	p := filepath.Join(t.TempDir(), "code.zip")
	os.WriteFile(p, zbuf.Bytes(), 0o644)
	return p
}

// TestExtractArchiveHostile: every entry name that is not a plain relative
// path is refused (never cleaned into the tree), nothing lands outside the
// directory, and ordinary archives (with "./" prefixes, directories) unpack.
func TestExtractArchiveHostile(t *testing.T) {
	outside := t.TempDir()
	reg := func(name string) tarEntry { return tarEntry{&tar.Header{Name: name, Typeflag: tar.TypeReg}, "x"} }
	cases := map[string]string{
		"dotdot":        tarGz(t, reg("pkg/run.sh"), reg("../../../../"+outside+"/escaped")),
		"inner dotdot":  tarGz(t, reg("pkg/../../escaped")),
		"pax dotdot":    tarGz(t, tarEntry{&tar.Header{Name: strings.Repeat("long/", 30) + strings.Repeat("../", 31) + "escaped", Typeflag: tar.TypeReg, Format: tar.FormatPAX}, "x"}),
		"empty comp":    tarGz(t, reg("pkg//x")),
		"dot file":      tarGz(t, reg(".")),
		"symlink dot":   tarGz(t, tarEntry{&tar.Header{Name: ".", Typeflag: tar.TypeSymlink, Linkname: "/"}, ""}),
		"through link":  tarGz(t, tarEntry{&tar.Header{Name: "pkg/out", Typeflag: tar.TypeSymlink, Linkname: outside}, ""}, reg("pkg/out/through-link")),
		"empty target":  tarGz(t, tarEntry{&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: ""}, ""}),
		"zip dotdot":    zipOf(t, "src/a.txt", "../../evil.txt"),
		"zip absolute":  zipOf(t, "/../evil.txt"),
		"zip empty":     zipOf(t, "a//b"),
		"zip backslash": zipOf(t, "src/../../evil.txt"),
	}
	for name, archive := range cases {
		t.Run(name, func(t *testing.T) {
			dst := t.TempDir()
			err := extractArchive(archive, dst, CodeLimits())
			if err == nil {
				t.Fatal("hostile archive accepted")
			}
			t.Logf("refused: %v", err)
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("archive wrote outside its directory: %v", entries)
			}
		})
	}
	ok := tarGz(t, tarEntry{&tar.Header{Name: "./", Typeflag: tar.TypeDir}, ""}, tarEntry{&tar.Header{Name: "./pkg/", Typeflag: tar.TypeDir}, ""},
		tarEntry{&tar.Header{Name: "./pkg/run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, "echo hi"}, tarEntry{&tar.Header{Name: "pkg/l", Typeflag: tar.TypeSymlink, Linkname: "../up"}, ""})
	dst := t.TempDir()
	if err := extractArchive(ok, dst, CodeLimits()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "pkg", "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("pkg/run.sh: %v %v", fi, err)
	}
	zdst := t.TempDir()
	if err := extractArchive(zipOf(t, "src/a.txt", "./src/b.txt"), zdst, CodeLimits()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(zdst, "src", "a.txt")); string(got) != "x" {
		t.Fatalf("zip entry: %q", got)
	}
}

// TestExtractArchiveBombs: entry count, total bytes, one file's size and the
// compression ratio each refuse an archive over its limit, naming it, and
// the disk used stays near the limit.
func TestExtractArchiveBombs(t *testing.T) {
	noise := make([]byte, 8<<20)
	mrand.New(mrand.NewSource(1)).Read(noise) // incompressible: only the ratio case uses zeros
	big := string(noise)
	many := []tarEntry{}
	for i := 0; i < 50; i++ {
		many = append(many, tarEntry{&tar.Header{Name: fmt.Sprintf("f%d", i), Typeflag: tar.TypeReg}, "x"})
	}
	var zb bytes.Buffer
	zwr := zip.NewWriter(&zb)
	w, _ := zwr.Create("zeros")
	w.Write(make([]byte, 8<<20))
	zwr.Close()
	zbomb := filepath.Join(t.TempDir(), "bomb.zip")
	os.WriteFile(zbomb, zb.Bytes(), 0o644)
	lim := safefs.Limits{MaxEntries: 20, MaxBytes: 4 << 20, MaxFileBytes: 2 << 20, MaxRatio: 100, RatioAfter: 1 << 20}
	for name, c := range map[string]struct {
		archive string
		lim     safefs.Limits
		want    string
	}{
		"entries":   {tarGz(t, many...), lim, "more than 20 entries"},
		"file size": {tarGz(t, tarEntry{&tar.Header{Name: "big", Typeflag: tar.TypeReg}, big}), lim, "file limit"},
		"bytes":     {tarGz(t, tarEntry{&tar.Header{Name: "a", Typeflag: tar.TypeReg}, big[:2<<20]}, tarEntry{&tar.Header{Name: "b", Typeflag: tar.TypeReg}, big[:2<<20]}, tarEntry{&tar.Header{Name: "c", Typeflag: tar.TypeReg}, big[:1<<20]}), lim, "bytes of files"},
		"ratio tar": {tarGz(t, tarEntry{&tar.Header{Name: "zeros", Typeflag: tar.TypeReg}, string(make([]byte, 8<<20))}), safefs.Limits{MaxRatio: 100, RatioAfter: 1 << 20}, "compression-ratio"},
		"ratio zip": {zbomb, safefs.Limits{MaxRatio: 100, RatioAfter: 1 << 20}, "compression-ratio"},
	} {
		t.Run(name, func(t *testing.T) {
			dst := t.TempDir()
			err := extractArchive(c.archive, dst, c.lim)
			if !errors.Is(err, safefs.ErrOverBudget) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a refusal naming %q, got %v", c.want, err)
			}
			var used int64
			filepath.Walk(dst, func(_ string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					used += fi.Size()
				}
				return nil
			})
			if used > 5<<20 {
				t.Fatalf("%d bytes written before the refusal", used)
			}
		})
	}
}

func TestPolicyAddresses(t *testing.T) {
	strict := Policy{}
	local := LocalPolicy("/")
	for addr, wantStrict := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1:248:1893:25c8:1946": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.100.100.200": false, "fd00:ec2::254": false, "fe80::1": false,
		"0.0.0.0": false, "::": false, "224.0.0.1": false, "::ffff:127.0.0.1": false, "100.64.0.1": false,
	} {
		ip := netip.MustParseAddr(addr)
		if got := strict.CheckAddr(ip) == nil; got != wantStrict {
			t.Errorf("strict %s allowed=%v, want %v", addr, got, wantStrict)
		}
	}
	if local.CheckAddr(netip.MustParseAddr("127.0.0.1")) != nil {
		t.Error("local policy refuses loopback")
	}
	if local.CheckAddr(netip.MustParseAddr("169.254.169.254")) == nil {
		t.Error("cloud metadata must be refused even with AllowPrivate")
	}
	for raw, ok := range map[string]bool{"https://x.org/a": true, "http://x.org/a": false, "file:///etc/passwd": false,
		"ftp://x.org/a": false, "git://x.org/r": false, "https://user:pw@x.org/a": false} {
		if _, err := strict.CheckURL("t", raw); (err == nil) != ok {
			t.Errorf("strict CheckURL(%s) = %v", raw, err)
		}
	}
}

func TestRedirectFromHTTPSToHTTPIsRefused(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("data")) }))
	defer plain.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/data", http.StatusFound)
	}))
	defer tls.Close()
	c := LocalPolicy("/").Client()
	c.Transport.(*stallGuard).next.(*schemeCheck).next.(*http.Transport).TLSClientConfig = tls.Client().Transport.(*http.Transport).TLSClientConfig
	_, err := c.Get(tls.URL)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("https→http redirect: %v", err)
	}
}

func TestHashCopyOnePass(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 300000) // 4.8 MB, not a multiple of the buffer
	var out bytes.Buffer
	got, n, err := hashCopy(context.Background(), &out, bytes.NewReader(data), nil)
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("copy: n=%d err=%v", n, err)
	}
	want := sha256Hex(data)
	if got != want {
		t.Fatalf("hash %s, want %s", got, want)
	}
}

// A 4-byte input costs one buffer of the ring, not all 32 (2 MiB).
func TestHashCopySmallInputOneBuffer(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 10; i++ {
		if _, n, err := hashCopy(context.Background(), io.Discard, strings.NewReader("x\n1\n"), nil); err != nil || n != 4 {
			t.Fatalf("n=%d err=%v", n, err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 2*copyBufSize {
		t.Fatalf("%d bytes allocated per 4-byte copy, want at most %d", per, 2*copyBufSize)
	}
}

func TestStrictPolicyRefusesLoopbackRegistry(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ref, _ := name.NewDigest(host + "/lab/x@" + d.String())
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	store, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	strict := Policy{}
	// Even told to speak plain http, the strict transport will not dial loopback.
	_, _, err = store.Resolve(context.Background(), ref.String(), imagestore.PullOptions{Transport: strict.Transport(), AllowHTTP: true})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("strict policy reached a loopback registry: %v", err)
	}
	local := LocalPolicy("/")
	if _, pulled, err := store.Resolve(context.Background(), ref.String(), imagestore.PullOptions{Transport: local.Transport(), AllowHTTP: true}); err != nil || !pulled {
		t.Fatalf("local policy: %v", err)
	}
}
