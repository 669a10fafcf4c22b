package scaffold

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	git "github.com/go-git/go-git/v5"
)

var update = flag.Bool("update", false, "rewrite testdata/init/*.golden from what init reports")

// The archive a test mirror serves: what Debian's Contents files say, in
// their format, for the modules the testdata packages use (arch-specific
// packages in Contents-amd64, the rest in Contents-all).
const (
	contentsArch = `usr/bin/python3                                             python/python3-minimal
usr/bin/Rscript                                             gnu-r/r-base-core
usr/bin/pandoc                                              text/pandoc
usr/lib/python3/dist-packages/numpy/__init__.py             python/python3-numpy
usr/lib/python3/dist-packages/_yaml.cpython-311-x86_64-linux-gnu.so python/python3-yaml
usr/lib/R/site-library/fixest/DESCRIPTION                   gnu-r/r-cran-fixest
usr/lib/R/site-library/dplyr/DESCRIPTION                    gnu-r/r-cran-dplyr
`
	contentsAll = `usr/bin/jupyter                                             python/jupyter-core
usr/bin/jupyter-nbconvert                                   python/jupyter-nbconvert
usr/lib/python3/dist-packages/sklearn/__init__.py           python/python3-sklearn
usr/lib/python3/dist-packages/sklearn/linear_model/__init__.py python/python3-sklearn
usr/lib/python3/dist-packages/pandas/__init__.py            python/python3-pandas
usr/lib/python3/dist-packages/statsmodels/__init__.py       python/python3-statsmodels
usr/lib/python3/dist-packages/matplotlib/__init__.py        python/python3-matplotlib
usr/lib/python3/dist-packages/nbconvert/__init__.py         python/python3-nbconvert
usr/lib/python3/dist-packages/ipykernel/__init__.py         python/python3-ipykernel
usr/lib/python3/dist-packages/requests/__init__.py          python/python3-requests
usr/lib/python3/dist-packages/yaml/__init__.py              python/python3-yaml
usr/lib/python3/dist-packages/google/protobuf/__init__.py   python/python3-protobuf
usr/lib/R/site-library/httr/DESCRIPTION                     gnu-r/r-cran-httr
usr/lib/R/site-library/knitr/DESCRIPTION                    gnu-r/r-cran-knitr
usr/lib/R/site-library/metafor/DESCRIPTION                  gnu-r/r-cran-metafor
usr/lib/R/site-library/rmarkdown/DESCRIPTION                gnu-r/r-cran-rmarkdown
usr/lib/R/site-library/ggplot2/DESCRIPTION                  gnu-r/r-cran-ggplot2
usr/share/doc/python3-sklearn/copyright                     python/python3-sklearn
`
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testMirror serves a Debian archive's bookworm Release and Contents files
// on loopback and writes a deb822 sources file naming it. hits counts the
// requests for Contents files.
func testMirror(t *testing.T) (sources string, hits *atomic.Int64) {
	t.Helper()
	files := map[string][]byte{"main/Contents-amd64.gz": gz(t, contentsArch), "main/Contents-all.gz": gz(t, contentsAll)}
	var rel strings.Builder
	rel.WriteString("Origin: Debian\nSuite: stable\nCodename: bookworm\nMD5Sum:\n 00000000000000000000000000000000 1 main/Contents-all.gz\nSHA256:\n")
	for name, body := range files {
		fmt.Fprintf(&rel, " %x %d %s\n", sha256.Sum256(body), len(body), name)
	}
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/debian/dists/bookworm/")
		switch body, found := files[name]; {
		case ok && name == "Release":
			w.Write([]byte(rel.String()))
		case ok && found:
			hits.Add(1)
			w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	sources = filepath.Join(t.TempDir(), "debian.sources")
	writeFile(t, sources, "Types: deb\nURIs: "+srv.URL+"/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"+
		"Types: deb\nURIs: "+srv.URL+"/debian-security\nSuites: bookworm-security\nComponents: main\n")
	return sources, hits
}

// testImage builds an image whose dpkg database says it ships python3,
// pandas, numpy, matplotlib, R and dplyr, into the image store of cacheDir.
func testImage(t *testing.T, cacheDir string) string {
	t.Helper()
	root := t.TempDir()
	lists := map[string]string{
		"python3-minimal:amd64": "/.\n/usr\n/usr/bin\n/usr/bin/python3\n",
		"python3-pandas":        "/usr/lib/python3/dist-packages/pandas\n/usr/lib/python3/dist-packages/pandas/__init__.py\n",
		"python3-numpy":         "/usr/lib/python3/dist-packages/numpy/__init__.py\n",
		"python3-matplotlib":    "/usr/lib/python3/dist-packages/matplotlib/__init__.py\n",
		"r-base-core":           "/usr/bin/Rscript\n/usr/lib/R/library/stats/DESCRIPTION\n",
		"r-cran-dplyr":          "/usr/lib/R/site-library/dplyr/DESCRIPTION\n",
	}
	for pkg, list := range lists {
		writeFile(t, filepath.Join(root, "var/lib/dpkg/info", pkg+".list"), list)
	}
	writeFile(t, filepath.Join(root, "var/lib/dpkg/info/python3-pandas.md5sums"), "not a list\n")
	writeFile(t, filepath.Join(root, "etc/os-release"), "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\n")
	store, err := runner.OpenImageStore(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := store.Build(root, "dotlab.example/init-test")
	if err != nil {
		t.Fatal(err)
	}
	return "dotlab.example/init-test@" + d.String()
}

// summary is what a golden file holds: the guesses and warnings init made
// about the code, with the paths of this run's temporary directories left out.
func summary(r *Result) string {
	var b strings.Builder
	argv, _ := json.Marshal(r.Manifest.Entrypoint)
	fmt.Fprintf(&b, "entrypoint: %s\nscratch: %v\n", argv, r.Manifest.Scratch)
	for _, n := range r.Needs {
		fmt.Fprintf(&b, "need: %s: %s %s\n", n, n.Status, n.Package)
	}
	for _, n := range r.Notes {
		switch n.Path {
		case "$.code", "$.scratch", "$.environment.image", "$.entrypoint":
			fmt.Fprintf(&b, "%s\n", n)
		}
	}
	if r.AptTxt != nil {
		fmt.Fprintf(&b, "apt.txt:\n%s", r.AptTxt)
	}
	return b.String()
}

// TestInitReadsTestdataPackages runs init on each package under
// testdata/init (a single script, a master script, a notebook, an R
// Markdown file, a missing import, network calls, interactive calls and
// host paths, writes next to the code) against an image and a loopback
// Debian mirror, and compares what it guessed and warned with the
// package's golden file.
func TestInitReadsTestdataPackages(t *testing.T) {
	testfix.Need(t, false, "python3", "Rscript")
	cache := t.TempDir()
	image := testImage(t, cache)
	sources, hits := testMirror(t)
	dirs, err := filepath.Glob("testdata/init/*")
	if err != nil {
		t.Fatal(err)
	}
	var shapes int
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		shapes++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res, err := Init(context.Background(), Options{Source: dir, Image: image, CacheDir: cache, AptSources: []string{sources}, Policy: runner.Policy{AllowPrivate: true}, Targets: []string{"x=1"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) != 0 {
				t.Fatalf("problems: %q", res.Problems)
			}
			got, golden := summary(res), dir+".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./scaffold -run TestInitReadsTestdataPackages -update, and read what it wrote)", err)
			}
			if got != string(want) {
				t.Errorf("init on %s reports:\n%s\nwant (%s):\n%s", dir, got, golden, want)
			}
		})
	}
	if shapes < 8 {
		t.Fatalf("%d testdata packages, want the 8 shapes", shapes)
	}
	// Both Contents files were fetched once: every later run read the cache.
	if n := hits.Load(); n != 2 {
		t.Errorf("%d Contents fetches, want 2 (then the cache in %s)", n, cache)
	}
}

// Without --image, each need is named with the archive's package, unchecked,
// and all go into the apt.txt; without the archive, the package is unknown.
func TestInitNeedsWithoutImage(t *testing.T) {
	testfix.Need(t, false, "python3")
	sources, _ := testMirror(t)
	dir := "testdata/init/missing-import"
	res, err := Init(context.Background(), Options{Source: dir, AptSources: []string{sources}, Policy: runner.Policy{AllowPrivate: true}, Targets: []string{"x=1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sklearn": "python3-sklearn", "pandas": "python3-pandas", "python3": "python3-minimal"}
	for _, n := range res.Needs {
		if want[n.Name] != n.Package || n.Status != NeedUnchecked {
			t.Errorf("need %+v, want package %q unchecked", n, want[n.Name])
		}
		delete(want, n.Name)
	}
	if len(want) != 0 || !strings.Contains(string(res.AptTxt), "\npython3-minimal\npython3-pandas\npython3-sklearn\n") {
		t.Fatalf("needs %+v left %v, apt.txt %q", res.Needs, want, res.AptTxt)
	}
	if c := notesAt(res, "check")["$.environment.image"]; !strings.Contains(c, "no image given") {
		t.Errorf("image note %q", c)
	}
	// No apt sources: the needs are still named, their packages not.
	res, err = Init(context.Background(), Options{Source: dir, Targets: []string{"x=1"}})
	if err != nil || len(res.Needs) != 3 || res.Needs[0].Package != "" || res.AptTxt != nil {
		t.Fatalf("%v needs %+v apt.txt %q", err, res.Needs, res.AptTxt)
	}
	if c := notesAt(res, "check")["$.environment.image"]; !strings.Contains(c, "Contents index was not read") {
		t.Errorf("image note %q", c)
	}
	// A mirror that serves a Contents file other than its Release says: refused.
	bad := filepath.Join(t.TempDir(), "bad.list")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/Release") {
			fmt.Fprintf(w, "SHA256:\n %s 10 main/Contents-all.gz\n", strings.Repeat("ab", 32))
			return
		}
		w.Write(gz(t, contentsAll))
	}))
	defer srv.Close()
	writeFile(t, bad, "deb [signed-by=/x.gpg] "+srv.URL+"/debian bookworm main\n")
	res, err = Init(context.Background(), Options{Source: dir, AptSources: []string{bad}, Policy: runner.Policy{AllowPrivate: true}, Targets: []string{"x=1"}})
	if err != nil || res.Needs[0].Package != "" || !strings.Contains(notesAt(res, "check")["$.environment.image"], "more than 10 bytes") {
		t.Fatalf("%v %+v %v", err, res.Needs, res.Notes)
	}
}

// The package's own apt.txt counts, a reader that is not installed and a
// file that does not parse are said, and a file over the bound is not read.
func TestInitReadingLimits(t *testing.T) {
	testfix.Need(t, false, "python3")
	sources, _ := testMirror(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.py"), "import sklearn\nimport yaml\n")
	writeFile(t, filepath.Join(dir, "apt.txt"), "# ours\npython3-sklearn\n")
	writeFile(t, filepath.Join(dir, "old.py"), "print 'python 2'\n")
	writeFile(t, filepath.Join(dir, "fit.R"), "library(fixest)\n")
	writeFile(t, filepath.Join(dir, "big.py"), "x = 1\n"+strings.Repeat("#", MaxCodeFileBytes))
	res, err := Init(context.Background(), Options{Source: dir, AptSources: []string{sources}, Policy: runner.Policy{AllowPrivate: true}, Rscript: "no-such-Rscript", Targets: []string{"x=1"}})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, n := range res.Needs {
		status[n.Name] = n.Status + " " + n.Package
	}
	if status["sklearn"] != NeedDeclared+" python3-sklearn" || status["yaml"] != NeedUnchecked+" python3-yaml" || status["fixest"] != "" {
		t.Errorf("needs %v", status)
	}
	if !strings.HasPrefix(string(res.AptTxt), "# Debian packages") || !strings.Contains(string(res.AptTxt), "\npython3-sklearn\npython3-minimal\npython3-yaml\n") {
		t.Errorf("apt.txt %q", res.AptTxt)
	}
	var warnings []string
	for _, n := range res.Notes {
		if n.Kind == "warning" {
			warnings = append(warnings, n.Text)
		}
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{"big.py: not read: over 4 MiB", "old.py:1: not parsed by python3 (SyntaxError", "1 r unit not read: no-such-Rscript is not on PATH (Debian package r-base-core)"} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in\n%s", want, all)
		}
	}
}

// A local repository is read as the pinned commit holds it (not the
// worktree), and a short --commit resolves to the full id.
func TestInitReadsThePinnedCommit(t *testing.T) {
	testfix.Need(t, false, "python3")
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	first := testfix.Commit(t, r, dir, map[string]string{"main.py": "import requests\nrequests.get('https://example.org')\n"})
	testfix.Commit(t, r, dir, map[string]string{"main.py": "print(1)\n"})
	writeFile(t, filepath.Join(dir, "main.py"), "input()\n") // uncommitted
	res, err := Init(context.Background(), Options{Source: dir, Targets: []string{"x=1"}})
	if err != nil || len(res.Findings) != 0 || len(res.Needs) != 1 {
		t.Fatalf("HEAD: %v findings %v needs %v", err, res.Findings, res.Needs)
	}
	res, err = Init(context.Background(), Options{Source: dir, Commit: first[:9], Targets: []string{"x=1"}})
	if err != nil || res.Manifest.Code.Commit != first || len(res.Findings) != 1 || res.Findings[0].Kind != FindNetwork {
		t.Fatalf("--commit %s: %v commit %s findings %v", first[:9], err, res.Manifest.Code.Commit, res.Findings)
	}
	if !strings.Contains(notesAt(res, "check")["$.code.commit"], "resolved to "+first) {
		t.Errorf("notes %v", res.Notes)
	}
	for _, bad := range []string{first[:5], "zzzzzzzz", strings.Repeat("0", 12)} {
		if _, err := Init(context.Background(), Options{Source: dir, Commit: bad}); err == nil {
			t.Errorf("--commit %s accepted", bad)
		}
	}
}

// An image without dpkg file lists but with its packages label: a need is
// in it when the archive's package for it is on the label.
func TestInitImageByPackagesLabel(t *testing.T) {
	testfix.Need(t, false, "python3")
	cache := t.TempDir()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "etc/os-release"), "VERSION_CODENAME=bookworm\n")
	store, err := runner.OpenImageStore(cache)
	if err != nil {
		t.Fatal(err)
	}
	d, err := store.BuildWith(root, "", imagestore.BuildOptions{Labels: map[string]string{imagestore.PackagesLabel: "python3-minimal=3.11.2-1+b1\npython3-pandas=1.5.3+dfsg-2"}})
	if err != nil {
		t.Fatal(err)
	}
	sources, _ := testMirror(t)
	res, err := Init(context.Background(), Options{Source: "testdata/init/missing-import", Image: "dotlab.example/labelled@" + d.String(), CacheDir: cache, AptSources: []string{sources}, Policy: runner.Policy{AllowPrivate: true}, Targets: []string{"x=1"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range res.Needs {
		got[n.Name] = n.Status + " " + n.Package
	}
	want := map[string]string{"sklearn": NeedMissing + " python3-sklearn", "pandas": NeedInImage + " python3-pandas", "python3": NeedInImage + " python3-minimal"}
	if !reflect.DeepEqual(got, want) || !strings.Contains(notesAt(res, "check")["$.environment.image"], "org.dotlab.packages (2 packages)") {
		t.Fatalf("needs %v, want %v; notes %v", got, want, res.Notes)
	}
	if string(res.AptTxt) != "# Debian packages the code needs beyond its image (dotlab manifest init); one a line\npython3-sklearn\n" {
		t.Errorf("apt.txt %q", res.AptTxt)
	}
}

// On the two package-shaped examples, init guesses the entrypoint and the
// scratch their committed manifests give, and names what they import.
func TestInitOnTheExampleClaims(t *testing.T) {
	testfix.Need(t, false, "python3", "Rscript")
	for dir, imports := range map[string][]string{
		"longley-1967":         {"matplotlib", "pandas", "statsmodels"},
		"viechtbauer-2010-bcg": {"metafor"},
	} {
		raw, err := os.ReadFile(filepath.Join("..", "examples", "claims", dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Init(context.Background(), Options{Source: filepath.Join("..", "examples", "claims", dir, "code"), Targets: []string{"x=1"}})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Manifest.Entrypoint, m.Entrypoint) || res.Manifest.Scratch != m.Scratch {
			t.Errorf("%s: entrypoint %q scratch %v, the committed manifest %q %v", dir, res.Manifest.Entrypoint, res.Manifest.Scratch, m.Entrypoint, m.Scratch)
		}
		var got []string
		for _, n := range res.Needs {
			if n.Kind != NeedCommand {
				got = append(got, n.Name)
			}
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, imports) || len(res.Findings) == 0 {
			t.Errorf("%s: needs %v, want %v; findings %v", dir, got, imports, res.Findings)
		}
	}
}
