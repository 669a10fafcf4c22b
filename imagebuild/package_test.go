package imagebuild

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/netpolicy"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/internal/testing/testimage"
	"github.com/dotlab/dotlab/sandbox"
)

// testWheel is a pure-Python wheel (PEP 427) of the distribution
// dotlab-hello 1.0, written here: a module, METADATA, WHEEL and RECORD.
func testWheel(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := [][2]string{
		{"dotlab_hello/__init__.py", "TOTAL = 3\n"},
		{"dotlab_hello-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: dotlab-hello\nVersion: 1.0\n"},
		{"dotlab_hello-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: dotlab-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, _ := zw.Create(f[0])
		w.Write([]byte(f[1]))
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString("dotlab_hello-1.0.dist-info/RECORD,,\n")
	w, _ := zw.Create("dotlab_hello-1.0.dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pipIndex serves a PEP 503 simple index with the test wheel on loopback.
func pipIndex(t *testing.T, wheel []byte) string {
	sum := sha256.Sum256(wheel)
	const file = "dotlab_hello-1.0-py3-none-any.whl"
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/dotlab-hello/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, file, hex.EncodeToString(sum[:]), file)
	})
	mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, r *http.Request) { w.Write(wheel) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/simple"
}

// runIn runs args in the image d with the real sandbox (runc) and returns stdout.
func runIn(t *testing.T, s *imagestore.Store, d string, args ...string) string {
	t.Helper()
	h, _ := imagestore.ParseDigest(d)
	img, err := s.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	rootfs, err := s.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	spec := sandbox.Spec{Rootfs: rootfs, CodeDir: t.TempDir(), DataDir: t.TempDir(), Args: args, ImageEnv: img.Config.Config.Env,
		Limits: sandbox.Limits{TimeoutSeconds: 120, MemoryBytes: 1 << 30, CPUs: 1}}
	res, err := sandbox.Runtime{StateDir: filepath.Join(t.TempDir(), "state")}.Run(context.Background(), spec, t.TempDir(), sandbox.IO{Stdout: &so, Stderr: &se})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v: %v exit %d\n%s", args, err, res.ExitCode, se.String())
	}
	return so.String()
}

func exampleStore(t *testing.T, recipe string) (*imagestore.Store, string) {
	t.Helper()
	testfix.Need(t, true, "buildah", "runc")
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s, testimage.Example(t, recipe, s)
}

// TestRequirementsInstallFromALoopbackIndex builds requirements.txt (one
// wheel the test wrote, pinned and hashed) over the python image: pip into
// /opt/venv from a loopback PEP 503 index through the egress proxy
// (python3-venv from the Debian mirror); the module imports in the sandbox.
// An unhashed requirement is refused before anything is built.
func TestRequirementsInstallFromALoopbackIndex(t *testing.T) {
	s, base := exampleStore(t, "python")
	wheel := testWheel(t)
	index := pipIndex(t, wheel)
	sum := sha256.Sum256(wheel)
	pkg := t.TempDir()
	repos := Repositories{PipIndex: index}
	o := Options{Store: s, Ref: "lab/pip", Rules: netpolicy.Rules{AllowPrivate: true}, WorkDir: filepath.Join(t.TempDir(), "buildah")}

	os.WriteFile(filepath.Join(pkg, "requirements.txt"), []byte("dotlab-hello==1.0\n"), 0o644)
	if _, err := BuildPackage(context.Background(), pkg, base, repos, o); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--hash") {
		t.Fatalf("unhashed requirement: %v", err)
	}
	os.WriteFile(filepath.Join(pkg, "requirements.txt"), []byte("dotlab-hello==1.0 --hash=sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o644)
	var log strings.Builder
	o.Log = &log
	res, err := BuildPackage(context.Background(), pkg, base, repos, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if out := runIn(t, s, res.Digest.String(), "python", "-c", "import dotlab_hello, sys; print(dotlab_hello.TOTAL, sys.prefix)"); out != "3 /opt/venv\n" {
		t.Fatalf("in the image: %q", out)
	}
	again, err := BuildPackage(context.Background(), pkg, base, repos, o)
	if err != nil || !again.Cached || again.Digest != res.Digest {
		t.Fatalf("second build of the same plan: %+v %v", again, err)
	}
}

// rSourcePackage is an R source package (dotlabhello 0.1, pure R) as
// R CMD build writes it: NAME/DESCRIPTION, NAMESPACE, R/*.R in a tar.gz.
func rSourcePackage(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range [][2]string{
		{"dotlabhello/DESCRIPTION", "Package: dotlabhello\nVersion: 0.1\nTitle: DotLab Test Package\nDescription: Returns the rerun's total.\nLicense: MIT\nAuthor: DotLab tests\nMaintainer: DotLab tests <tests@dotlab.invalid>\nNeedsCompilation: no\n"},
		{"dotlabhello/NAMESPACE", "export(hello)\n"},
		{"dotlabhello/R/hello.R", "hello <- function() 3\n"},
	} {
		tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(f[1]))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// TestDescriptionInstallsFromALoopbackCRAN builds a DESCRIPTION naming an
// R package and an install.R over the R image, from a loopback CRAN-like
// repository (its src/contrib/PACKAGES and the source tarball the test
// wrote); the package loads in the sandbox, and install.R ran with that
// repository.
func TestDescriptionInstallsFromALoopbackCRAN(t *testing.T) {
	s, base := exampleStore(t, "r")
	tarball := rSourcePackage(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/src/contrib/PACKAGES", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "Package: dotlabhello\nVersion: 0.1\nNeedsCompilation: no\n\n")
	})
	mux.HandleFunc("/src/contrib/dotlabhello_0.1.tar.gz", func(w http.ResponseWriter, r *http.Request) { w.Write(tarball) })
	cran := httptest.NewServer(mux)
	defer cran.Close()
	pkg := t.TempDir()
	os.WriteFile(filepath.Join(pkg, "DESCRIPTION"), []byte("Package: analysis\nVersion: 1.0\nDepends: R (>= 4.0)\nImports: dotlabhello\n"), 0o644)
	// install.R runs after, with the same repository as repos.
	os.WriteFile(filepath.Join(pkg, "install.R"), []byte(`install.packages("dotlabhello"); writeLines(getOption("repos")[["CRAN"]], "/usr/local/share/install-r-repos")`+"\n"), 0o644)
	var log strings.Builder
	o := Options{Store: s, Ref: "lab/r", Rules: netpolicy.Rules{AllowPrivate: true}, WorkDir: filepath.Join(t.TempDir(), "buildah"), Log: &log}
	res, err := BuildPackage(context.Background(), pkg, base, Repositories{CRAN: cran.URL}, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if out := runIn(t, s, res.Digest.String(), "Rscript", "-e", "cat(dotlabhello::hello())"); out != "3" {
		t.Fatalf("in the image: %q", out)
	}
	if out := runIn(t, s, res.Digest.String(), "cat", "/usr/local/share/install-r-repos"); out != cran.URL+"\n" {
		t.Fatalf("install.R saw repos %q, want %s", out, cran.URL)
	}
}
