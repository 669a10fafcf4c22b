// Package testimage builds the busybox fixture image for tests outside
// imagestore (whose own tests cannot import this without an import cycle).
package testimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// Busybox builds testfix.BusyboxRootfs into store under ref and unpacks it.
// It returns the manifest digest ("sha256:…") and the rootfs directory.
func Busybox(t testing.TB, store *imagestore.Store, ref string) (string, string) {
	t.Helper()
	d, err := store.Build(testfix.BusyboxRootfs(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := store.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	rootfs, err := store.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d.String(), rootfs
}

// Example returns the example image of recipe (examples/images/<recipe>,
// e.g. "python" or "python-sci") as NAME@DIGEST, copied into dst: from the
// images var directory ($DOTLAB_IMAGES_VAR, else the repository's var/)
// when that recipe is built there, else built there first with the recipe
// (minutes: root and debootstrap; skipped outside CI when missing).
func Example(t testing.TB, recipe string, dst *imagestore.Store) string {
	t.Helper()
	testfix.Need(t, true, "debootstrap", "chroot", "go")
	root := moduleRoot(t)
	varDir := os.Getenv("DOTLAB_IMAGES_VAR")
	if varDir == "" {
		varDir = filepath.Join(root, "var")
	}
	src, err := imagestore.Open(filepath.Join(varDir, "cache", "images"))
	if err != nil {
		t.Fatal(err)
	}
	ref := packedRef(varDir, recipe)
	d, err := imagestore.ParseRef(ref)
	var img *imagestore.Image
	if err == nil {
		h, _ := imagestore.ParseDigest(d.DigestStr())
		img, err = src.Image(h)
	}
	if err != nil {
		ref = buildRecipe(t, root, varDir, recipe)
		d, _ := imagestore.ParseRef(ref)
		h, _ := imagestore.ParseDigest(d.DigestStr())
		if img, err = src.Image(h); err != nil {
			t.Fatal(err)
		}
	}
	layoutDir := filepath.Join(t.TempDir(), "layout")
	if err := src.ExportLayout(img, layoutDir, ref); err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(ref, "@")
	if _, err := dst.Import(layoutDir, name); err != nil {
		t.Fatal(err)
	}
	return ref
}

// packedRef is the NAME@DIGEST recorded in VAR/images/RECIPE.packed, or "".
func packedRef(varDir, recipe string) string {
	data, err := os.ReadFile(filepath.Join(varDir, "images", recipe+".packed"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		return ""
	}
	return f[len(f)-1]
}

// buildRecipe builds dotlab and runs the recipe into varDir; it returns NAME@DIGEST.
func buildRecipe(t testing.TB, root, varDir, recipe string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dotlab")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "dotlab")).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stderr strings.Builder
	cmd := exec.Command("bash", filepath.Join(root, "examples", "images", recipe, "build.sh"), bin, varDir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s/build.sh: %v\n%s", recipe, err, stderr.String())
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("%s/build.sh printed nothing", recipe)
	}
	return f[len(f)-1]
}

// moduleRoot is the directory holding go.mod, above the test's directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}
