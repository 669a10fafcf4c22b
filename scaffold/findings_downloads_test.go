package scaffold

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/runner"
)

// TestInitFetchesPinnedAndDownloadWrites: a network call whose URL is
// pinned with --download is a check line naming downloads[i], not a
// warning; one whose URL is not pinned stays a warning; urlretrieve(URL,
// "f") and download.file(url, "f") are writes next to the code (scratch).
func TestInitFetchesPinnedAndDownloadWrites(t *testing.T) {
	testfix.Need(t, false, "python3", "Rscript")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a,b\n")) }))
	defer srv.Close()
	pinned, other := srv.URL+"/a.csv", srv.URL+"/b.csv"
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.py"), []byte("import urllib.request\nurllib.request.urlretrieve(\""+pinned+"\", \"a.csv\")\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "fetch.R"), []byte("download.file(\""+other+"\", \"b.csv\")\n"), 0o644)
	res, err := Init(context.Background(), Options{Source: dir, Targets: []string{"t=1"}, NoArchive: true,
		Policy: runner.Policy{AllowPrivate: true}, Downloads: []string{pinned}})
	if err != nil {
		t.Fatal(err)
	}
	var checks, warnings []string
	for _, n := range res.Notes {
		switch {
		case n.Path == "$.code" && n.Kind == "check":
			checks = append(checks, n.Text)
		case n.Path == "$.code" && n.Kind == "warning":
			warnings = append(warnings, n.Text)
		}
	}
	if c := strings.Join(checks, "\n"); !strings.Contains(c, pinned) || !strings.Contains(c, "pinned in downloads[0]") {
		t.Errorf("checks on $.code: %q", checks)
	}
	w := strings.Join(warnings, "\n")
	if strings.Contains(w, pinned) || !strings.Contains(w, other) {
		t.Errorf("warnings on $.code: %q", warnings)
	}
	if s := notesAt(res, "check")["$.scratch"]; !res.Manifest.Scratch || !strings.Contains(s, `"a.csv"`) || !strings.Contains(s, `"b.csv"`) {
		t.Errorf("scratch %v: %q", res.Manifest.Scratch, s)
	}
}

// TestInitProposesTheNotebookRecipeAndInstallRForCRANOnly: a Python
// package with a notebook is proposed examples/images/python-notebook; an
// R package no Debian package ships is proposed install.R with image
// build --base … --cran.
func TestInitProposesTheNotebookRecipeAndInstallRForCRANOnly(t *testing.T) {
	testfix.Need(t, false, "python3", "Rscript")
	res, err := Init(context.Background(), Options{Source: "testdata/init/notebook", Targets: []string{"t=1"}, NoArchive: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := notesAt(res, "placeholder")["$.environment.image"]; !strings.Contains(p, NotebookRecipe) {
		t.Errorf("notebook package: image note %q", p)
	}
	sources, _ := testMirror(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.R"), []byte("library(notOnDebianXyz)\n"), 0o644)
	res, err = Init(context.Background(), Options{Source: dir, Targets: []string{"t=1"}, AptSources: []string{sources}, Policy: runner.Policy{AllowPrivate: true}})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, n := range res.Notes {
		all = append(all, n.String())
	}
	if s := strings.Join(all, "\n"); !strings.Contains(s, `install.R (install.packages("notOnDebianXyz"))`) || !strings.Contains(s, "--cran URL") {
		t.Errorf("CRAN-only package notes:\n%s", s)
	}
}
