// Package debrepotest builds a small apt repository for tests: .deb files
// made with dpkg-deb from files the test names, their Packages index and an
// unsigned Release file (used with [trusted=yes]), served on loopback. The
// builds against it are the reproducibility check of docs/sandbox.md
// "Building an environment": the live Debian mirror changes during a day.
package debrepotest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// Deb is one package: its control fields and its files (path inside the
// system → content; mode 0755 under usr/bin, else 0644).
type Deb struct {
	Name, Version, Depends string
	Files                  map[string]string
}

// Repo is a served repository.
type Repo struct {
	// URL is the base (http://127.0.0.1:PORT); SourcesLine the apt line for it.
	URL, SourcesLine string
}

// Serve builds debs into a flat repository and serves it until the test ends.
func Serve(t testing.TB, debs ...Deb) *Repo {
	t.Helper()
	testfix.Need(t, false, "dpkg-deb")
	dir := t.TempDir()
	var index strings.Builder
	for _, d := range debs {
		file := build(t, dir, d)
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&index, "Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: DotLab tests <tests@dotlab.invalid>\n", d.Name, d.Version)
		if d.Depends != "" {
			fmt.Fprintf(&index, "Depends: %s\n", d.Depends)
		}
		fmt.Fprintf(&index, "Filename: ./%s\nSize: %d\nSHA256: %s\nDescription: DotLab test package %s\n\n", file, len(data), hex.EncodeToString(sum[:]), d.Name)
	}
	packages := []byte(index.String())
	write(t, filepath.Join(dir, "Packages"), string(packages), 0o644)
	sum := sha256.Sum256(packages)
	write(t, filepath.Join(dir, "Release"), fmt.Sprintf("Origin: dotlab-test\nLabel: dotlab-test\nDate: Thu, 01 Jan 1970 00:00:00 UTC\nSHA256:\n %s %d Packages\n",
		hex.EncodeToString(sum[:]), len(packages)), 0o644)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return &Repo{URL: srv.URL, SourcesLine: "deb [trusted=yes] " + srv.URL + "/ ./"}
}

// build writes NAME_VERSION_all.deb into dir with dpkg-deb and returns its name.
func build(t testing.TB, dir string, d Deb) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), d.Name)
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: DotLab tests <tests@dotlab.invalid>\nDescription: DotLab test package %s\n", d.Name, d.Version, d.Name)
	if d.Depends != "" {
		control += "Depends: " + d.Depends + "\n"
	}
	write(t, filepath.Join(root, "DEBIAN", "control"), control, 0o644)
	paths := make([]string, 0, len(d.Files))
	for p := range d.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(p, "usr/bin/") {
			mode = 0o755
		}
		write(t, filepath.Join(root, p), d.Files[p], mode)
	}
	name := fmt.Sprintf("%s_%s_all.deb", d.Name, d.Version)
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, filepath.Join(dir, name))
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	return name
}

func write(t testing.TB, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
