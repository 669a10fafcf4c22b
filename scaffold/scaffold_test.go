package scaffold

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
)

func TestHalfUnit(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"2.76", "0.005"},
		{"2.760", "0.0005"},
		{"12", "0.5"},
		{"0.05", "0.005"},
		{"-3.14", "0.005"},
		{"1.5e-3", "0.00005"},   // half of 1e-4, the mantissa's last digit
		{"1e10", "5000000000"},  // one significant digit
		{"1.00e10", "50000000"}, // three
		{"2.5E+2", "5"},
		{"1200", "0.5"}, // trailing zeros of an integer are printed digits
		{"0", "0.5"},
		{"0.000", "0.0005"},
		{"1e-300", "5e-301"},
		{"123456789.123456789", "0.0000000005"},
	} {
		got, err := HalfUnit(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("HalfUnit(%s) = %q, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"+2.76", "2,76", ".5", "1.", "NaN", "", "1e400", "0x10"} {
		if got, err := HalfUnit(bad); err == nil {
			t.Errorf("HalfUnit(%q) = %s, want an error", bad, got)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		"Rscript main.R":                   {"Rscript", "main.R"},
		"  python3   -u  run.py ":          {"python3", "-u", "run.py"},
		`Rscript -e 'source("a b.R")'`:     {"Rscript", "-e", `source("a b.R")`},
		`sh -c "cd src && make \"all\""`:   {"sh", "-c", `cd src && make "all"`},
		`python3 my\ script.py`:            {"python3", "my script.py"},
		`Rscript --args x=1 a~b c#d`:       {"Rscript", "--args", "x=1", "a~b", "c#d"},
		`sh -c 'Rscript main.R > out.txt'`: {"sh", "-c", "Rscript main.R > out.txt"},
		`python3 ''`:                       {"python3", ""},
	} {
		got, err := SplitCommand(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "   ", "Rscript main.R > out.txt", "a | b", "a; b", "python3 $HOME/x.py", "echo `id`", `echo "$X"`, "ls *.R", "~/run.sh", "run.sh # comment", "'open", `"open`, `trailing\`} {
		if got, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) = %q, want an error", bad, got)
		}
	}
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func notesAt(r *Result, kind string) map[string]string {
	m := map[string]string{}
	for _, n := range r.Notes {
		if n.Kind == kind {
			m[n.Path] = n.Text
		}
	}
	return m
}

func TestLocalGitPackage(t *testing.T) {
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	head := testfix.Commit(t, r, dir, map[string]string{"analysis.R": "source('helpers.R')\n", "helpers.R": "f <- 1\n", "data/codebook.csv": "var,desc\n", ".gitignore": "data/raw/\n"})
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"https://github.com/lab/did-replication.git"}}); err != nil {
		t.Fatal(err)
	}
	// Unpublished data next to the code, ignored by git: hashed into datasets.
	writeFile(t, filepath.Join(dir, "data/raw/panel.csv"), "id,y\n1,2.5\n")

	res, err := Init(context.Background(), Options{Source: dir, Targets: []string{"did=2.76", "se=0.050"},
		Sources: []string{`did=stdout:regex:(?m)^did\s+([-0-9.eE]+)`}})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if m.Code.Commit != head || m.Code.Repository != "https://github.com/lab/did-replication.git" || m.Code.Archive != nil {
		t.Fatalf("code = %+v, want commit %s at the origin", m.Code, head)
	}
	if len(m.Datasets) != 1 || m.Datasets[0].Path != "raw/panel.csv" || m.Datasets[0].Name != "raw_panel.csv" || m.Datasets[0].SHA256 != sha("id,y\n1,2.5\n") {
		t.Fatalf("datasets = %+v", m.Datasets)
	}
	if m.Targets[0].Tolerance.Value != "0.005" || m.Targets[1].Value != "0.050" || m.Targets[1].Tolerance.Value != "0.0005" || m.Targets[0].Source == nil || m.Targets[0].Source.Stream != "stdout" {
		t.Fatalf("targets = %+v", m.Targets)
	}
	if !reflect.DeepEqual(m.Entrypoint, []string{"Rscript", "analysis.R"}) || !reflect.DeepEqual(m.Requires, []string{"r"}) {
		t.Fatalf("entrypoint %q requires %q", m.Entrypoint, m.Requires)
	}
	ph := notesAt(res, "placeholder")
	for _, at := range []string{"$.title", "$.source.citation", "$.datasets[0].url", "$.environment.image"} {
		if ph[at] == "" {
			t.Errorf("no placeholder note at %s: %v", at, ph)
		}
	}
	if !strings.Contains(ph["$.environment.image"], "examples/images/r/build.sh") || !strings.Contains(ph["$.datasets[0].url"], "not listable") {
		t.Errorf("notes: %v", ph)
	}
	checks := notesAt(res, "check")
	if !strings.Contains(checks["$.entrypoint"], "guess") || !strings.Contains(checks["$.targets[1].source"], "results.json") {
		t.Errorf("checks: %v", checks)
	}
	if res.Valid || len(res.Problems) != 0 || res.Placeholders() != 4 {
		t.Fatalf("valid %v problems %q placeholders %d", res.Valid, res.Problems, res.Placeholders())
	}
	// The printed manifest fails validation only at placeholders.
	if _, err := manifest.Parse(res.JSON); err == nil {
		t.Fatal("a manifest with placeholders validates")
	}

	// Everything given: no placeholder left, valid as printed.
	res, err = Init(context.Background(), Options{Source: dir, Targets: []string{"did=2.76"}, Title: "DiD", Citation: "A. B. (2020)",
		DataURL: "https://zenodo.org/records/1/files", Image: "dotlab.example/r@sha256:" + strings.Repeat("ab", 32), Entrypoint: "Rscript analysis.R"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.Placeholders() != 0 || res.Manifest.Datasets[0].URL != "https://zenodo.org/records/1/files/raw/panel.csv" {
		t.Fatalf("valid %v placeholders %d notes %v", res.Valid, res.Placeholders(), res.Notes)
	}
	if _, err := manifest.Parse(res.JSON); err != nil {
		t.Fatal(err)
	}

	// --commit pins an earlier commit of a local repository; a missing one is an error.
	later := testfix.Commit(t, r, dir, map[string]string{"notes.txt": "n\n"})
	res, err = Init(context.Background(), Options{Source: dir, Commit: head, Targets: []string{"did=2.76"}})
	if err != nil || res.Manifest.Code.Commit != head || later == head {
		t.Fatalf("--commit: %v %s", err, res.JSON)
	}
	if _, err := Init(context.Background(), Options{Source: dir, Commit: strings.Repeat("cd", 20)}); err == nil {
		t.Fatal("a missing --commit is accepted")
	}
	if _, err := Init(context.Background(), Options{Source: dir, DataDir: filepath.Join(dir, "nope")}); err == nil {
		t.Fatal("a missing --data is accepted")
	}
	// An uncommitted change to a tracked file is said.
	writeFile(t, filepath.Join(dir, "analysis.R"), "changed\n")
	res, err = Init(context.Background(), Options{Source: dir, Targets: []string{"did=2.76"}})
	if err != nil || !strings.Contains(notesAt(res, "check")["$.code.commit"], "uncommitted") {
		t.Fatalf("dirty worktree: %v %v", err, res.Notes)
	}
}

func TestOriginNotProposed(t *testing.T) {
	for origin, hint := range map[string]string{
		"git@github.com:lab/pkg.git":                 "https://github.com/lab/pkg.git",
		"https://user:ghp_secret@github.com/lab/pkg": "credentials",
		"http://github.com/lab/pkg.git":              "https",
		"":                                           "no origin",
	} {
		dir := t.TempDir()
		r, _ := git.PlainInit(dir, false)
		testfix.Commit(t, r, dir, map[string]string{"main.py": "print(1)\n"})
		if origin != "" {
			r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{origin}})
		}
		res, err := Init(context.Background(), Options{Source: dir, Targets: []string{"x=1"}})
		if err != nil {
			t.Fatal(err)
		}
		note := notesAt(res, "placeholder")["$.code.repository"]
		if !strings.HasPrefix(res.Manifest.Code.Repository, "REPLACE") || !strings.Contains(note, hint) || strings.Contains(note, "ghp_secret") || strings.Contains(string(res.JSON), "ghp_secret") {
			t.Errorf("origin %q: repository %q, note %q", origin, res.Manifest.Code.Repository, note)
		}
		if len(res.Problems) != 0 {
			t.Errorf("origin %q: problems %q", origin, res.Problems)
		}
	}
}

func TestPlainDirectoryImages(t *testing.T) {
	for _, c := range []struct {
		files  []string
		recipe string
		req    []string
		entry  []string
	}{
		{[]string{"DESCRIPTION", "R/fit.R", "analysis.Rmd"}, "examples/images/r/build.sh", []string{"r"},
			[]string{"Rscript", "-e", "rmarkdown::render('analysis.Rmd', output_dir = '/work/out', intermediates_dir = tempdir())"}},
		{[]string{"DESCRIPTION", "R/fit.R", "R/plot.R"}, "examples/images/r/build.sh", []string{"r"}, nil},
		{[]string{"requirements.txt", "src/model.py", "main.py"}, "examples/images/python-sci/build.sh", []string{"python"}, []string{"python3", "main.py"}},
		{[]string{"run.sh", "README.md"}, "examples/images/python/build.sh", nil, []string{"sh", "run.sh"}},
	} {
		dir := t.TempDir()
		for _, f := range c.files {
			writeFile(t, filepath.Join(dir, f), "x\n")
		}
		writeFile(t, filepath.Join(dir, "data/sleep.csv"), "extra,group\n")
		res, err := Init(context.Background(), Options{Source: dir, Targets: []string{"t=4.062"}})
		if err != nil {
			t.Fatal(err)
		}
		m := res.Manifest
		if !strings.Contains(notesAt(res, "placeholder")["$.environment.image"], c.recipe) || !reflect.DeepEqual(m.Requires, c.req) {
			t.Errorf("%v: image note %q, requires %q", c.files, notesAt(res, "placeholder")["$.environment.image"], m.Requires)
		}
		if c.entry != nil && !reflect.DeepEqual(m.Entrypoint, c.entry) || c.entry == nil && notesAt(res, "placeholder")["$.entrypoint"] == "" {
			t.Errorf("%v: entrypoint %q", c.files, m.Entrypoint)
		}
		if m.Code.Archive == nil || m.Code.Repository != "" || len(m.Datasets) != 1 || m.Datasets[0].SHA256 != sha("extra,group\n") || m.Targets[0].Tolerance.Value != "0.0005" {
			t.Errorf("%v: %s", c.files, res.JSON)
		}
		if len(res.Problems) != 0 || res.Valid {
			t.Errorf("%v: problems %q valid %v", c.files, res.Problems, res.Valid)
		}
	}
	// --archive FILE pins the archive's hash.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.R"), "1\n")
	arc := filepath.Join(t.TempDir(), "pkg.tar.gz")
	writeFile(t, arc, "archive bytes")
	res, err := Init(context.Background(), Options{Source: dir, Archive: arc, Targets: []string{"x=1"}})
	if err != nil || res.Manifest.Code.Archive.SHA256 != sha("archive bytes") || notesAt(res, "placeholder")["$.code.archive.url"] == "" {
		t.Fatalf("%v %s", err, res.JSON)
	}
	if len(res.Manifest.Datasets) != 0 || !strings.Contains(string(res.JSON), `"datasets": []`) {
		t.Fatalf("no data: %s", res.JSON)
	}
}

func TestRealProblemsAndRefusals(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.R"), "1\n")
	writeFile(t, filepath.Join(dir, "data/wave 2.csv"), "a\n") // a space: not a valid data path
	res, err := Init(context.Background(), Options{Source: dir, Targets: []string{"did=2.76"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) == 0 || !strings.Contains(strings.Join(res.Problems, "\n"), "$.datasets[0].path") {
		t.Fatalf("problems %q", res.Problems)
	}
	// A symbolic link among the data files is refused.
	os.Remove(filepath.Join(dir, "data/wave 2.csv"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "data/passwd"))
	if _, err := Init(context.Background(), Options{Source: dir}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("symlink: %v", err)
	}
	os.Remove(filepath.Join(dir, "data/passwd"))
	for _, o := range []Options{
		{Source: dir, Targets: []string{"did=+2.76"}},
		{Source: dir, Targets: []string{"2.76"}},
		{Source: dir, Entrypoint: "Rscript main.R > log.txt"},
		{Source: dir, Targets: []string{"a=1"}, Sources: []string{"b=stdout:regex:(x)"}},
		{Source: dir, Targets: []string{"a=1"}, Sources: []string{"a=stdin:regex:(x)"}},
		{Source: filepath.Join(dir, "missing")},
	} {
		if _, err := Init(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	// A source under /work/scratch turns scratch on; no targets at all is a placeholder.
	res, err = Init(context.Background(), Options{Source: dir, Targets: []string{"a=1"}, Sources: []string{"a=/work/scratch/out/t.csv:csv:estimate:term=did"}})
	if err != nil || !res.Manifest.Scratch || res.Manifest.Targets[0].Source.CSV.Row["term"] != "did" || len(res.Problems) != 0 {
		t.Fatalf("scratch source: %v %s %q", err, res.JSON, res.Problems)
	}
	res, err = Init(context.Background(), Options{Source: dir})
	if err != nil || notesAt(res, "placeholder")["$.targets"] == "" || len(res.Problems) != 0 {
		t.Fatalf("no targets: %v %v %q", err, res.Notes, res.Problems)
	}
}

func TestGitURL(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pkg")
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	old := testfix.Commit(t, r, dir, map[string]string{"main.py": "print(1)\n", "data/in.csv": "a\n"})
	tip := testfix.Commit(t, r, dir, map[string]string{"main.py": "print(2)\n", "requirements.txt": "pandas==2.1.4\n"})
	url := testfix.GitHTTP(t, root) + "/pkg/.git"
	p := runner.Policy{AllowPrivate: true}
	res, err := Init(context.Background(), Options{Source: url, Policy: p, Targets: []string{"x=1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if m.Code.Commit != tip || m.Code.Repository != url || len(m.Datasets) != 0 || !reflect.DeepEqual(m.Entrypoint, []string{"python3", "main.py"}) {
		t.Fatalf("default branch: %s", res.JSON)
	}
	if !strings.Contains(notesAt(res, "placeholder")["$.environment.image"], "python-sci") || !strings.Contains(notesAt(res, "check")["$.datasets"], "pinned inside the code") {
		t.Fatalf("notes: %v", res.Notes)
	}
	res, err = Init(context.Background(), Options{Source: url, Policy: p, Commit: old, Targets: []string{"x=1.0"}})
	if err != nil || res.Manifest.Code.Commit != old {
		t.Fatalf("--commit: %v %s", err, res.JSON)
	}
	if _, err := Init(context.Background(), Options{Source: url, Policy: p, Commit: strings.Repeat("cd", 20)}); !errors.Is(err, runner.ErrNoCommit) {
		t.Fatalf("missing commit: %v", err)
	}
	// Strict (no --allow-private-urls): the loopback forge is refused.
	if _, err := Init(context.Background(), Options{Source: url}); !errors.Is(err, runner.ErrRefused) {
		t.Fatalf("strict policy: %v", err)
	}
}
