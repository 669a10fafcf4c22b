package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// manifest init names what the code imports that no image was given for,
// with the Debian package a loopback mirror's Contents index names, and
// writes the apt.txt offered to a new file only.
func TestManifestInitAptTxt(t *testing.T) {
	testfix.Need(t, false, "python3")
	sources := contentsMirror(t, "usr/lib/python3/dist-packages/sklearn/__init__.py python/python3-sklearn\nusr/bin/python3 python/python3-minimal\nusr/lib/python3/dist-packages/yaml/__init__.py python/python3-yaml\n")
	pkg := t.TempDir()
	os.WriteFile(filepath.Join(pkg, "main.py"), []byte("import sklearn\nname = input('who? ')\n"), 0o644)
	apt := filepath.Join(pkg, "apt.txt")
	args := []string{"manifest", "init", pkg, "--target", "x=1", "--cache", t.TempDir(), "--apt-sources", sources, "--allow-private-urls", "--write-apt-txt", apt}
	_, errOut, code := runCLI(t, args...)
	body, err := os.ReadFile(apt)
	if code != 0 || err != nil || !strings.HasSuffix(string(body), "\npython3-minimal\npython3-sklearn\n") {
		t.Fatalf("code %d apt.txt %q (%v)\nstderr %s", code, body, err, errOut)
	}
	for _, want := range []string{"manifest: apt.txt: python3-sklearn\n", "apt.txt written to " + apt,
		"$.environment.image: check: python module sklearn (main.py:1): Debian package python3-sklearn",
		"$.code: warning: main.py:2: input() waits for a person", "docs/howto-replication-package.md#interactive-and-platform-only-calls"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// Again: the package's apt.txt now names both, nothing is left to add; an existing file is not overwritten.
	_, errOut, code = runCLI(t, args...)
	if code != 0 || !strings.Contains(errOut, "nothing to add") || !strings.Contains(errOut, "which the package's apt.txt names") {
		t.Fatalf("second run: code %d\n%s", code, errOut)
	}
	os.WriteFile(filepath.Join(pkg, "fit.py"), []byte("import sklearn, yaml\n"), 0o644)
	if _, errOut, code = runCLI(t, args...); code != 2 || !strings.Contains(errOut, "not overwritten") {
		t.Fatalf("overwrite: code %d\n%s", code, errOut)
	}
}

// contentsMirror serves a Debian mirror on loopback whose trixie main
// holds only a Contents-all.gz of the given lines (PATH SECTION/PACKAGE),
// with its Release hash, and returns an apt sources file naming it.
func contentsMirror(t *testing.T, lines string) string {
	t.Helper()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	fmt.Fprint(zw, lines)
	zw.Close()
	contents := z.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debian/dists/trixie/Release":
			fmt.Fprintf(w, "SHA256:\n %x %d main/Contents-all.gz\n", sha256.Sum256(contents), len(contents))
		case "/debian/dists/trixie/main/Contents-all.gz":
			w.Write(contents)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	sources := filepath.Join(t.TempDir(), "mirror.list")
	os.WriteFile(sources, []byte("deb "+srv.URL+"/debian trixie main\n"), 0o644)
	return sources
}
