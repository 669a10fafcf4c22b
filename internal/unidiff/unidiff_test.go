package unidiff

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// gitDiff is what `git diff --no-index` prints for old → new of one file
// (either side "" for a missing file), with a/ and b/ names.
func gitDiff(t *testing.T, name, old, new string, oldExists, newExists bool) string {
	t.Helper()
	dir := t.TempDir()
	for side, c := range map[string]struct {
		body string
		ok   bool
	}{"a": {old, oldExists}, "b": {new, newExists}} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, side, name)), 0o755)
		if c.ok {
			if err := os.WriteFile(filepath.Join(dir, side, name), []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := "a/"+name, "b/"+name
	if !oldExists {
		a = "/dev/null"
	}
	if !newExists {
		b = "/dev/null"
	}
	cmd := exec.Command("git", "diff", "--no-index", "--no-color", "--no-prefix", "--", a, b)
	cmd.Dir = dir
	out, _ := cmd.Output() // exit status 1 means "differs"
	if len(out) == 0 {
		t.Fatalf("git diff printed nothing")
	}
	return string(out)
}

func TestApplyReproducesGitDiffs(t *testing.T) {
	testfix.Need(t, false, "git")
	long := strings.Repeat("line\n", 40)
	cases := []struct {
		name, old, new string
	}{
		{"one line", "setwd(choose.dir())\nx <- read.csv('a.csv')\nprint(mean(x$v))\n", "setwd('/work/scratch')\nx <- read.csv('a.csv')\nprint(mean(x$v))\n"},
		{"two hunks", "a\n" + long + "b\n" + long + "c\n", "A\n" + long + "b\n" + long + "C\n"},
		{"insert at top", "x\ny\n", "options(stringsAsFactors = TRUE)\nx\ny\n"},
		{"no newline at end, kept", "a\nb", "a\nB"},
		{"newline added at end", "a\nb", "a\nb\n"},
		{"newline removed at end", "a\nb\n", "a\nb"},
		{"empty context lines", "a\n\nb\n\nc\n", "a\n\nB\n\nc\n"},
	}
	for _, c := range cases {
		d := gitDiff(t, "analysis.R", c.old, c.new, true, true)
		fds, err := Parse(d)
		if err != nil {
			t.Fatalf("%s: parse: %v\n%s", c.name, err, d)
		}
		if len(fds) != 1 || fds[0].Path != "analysis.R" || fds[0].Create || fds[0].Delete {
			t.Fatalf("%s: parsed %+v", c.name, fds)
		}
		got, err := Apply([]byte(c.old), fds[0])
		if err != nil {
			t.Fatalf("%s: apply: %v\n%s", c.name, err, d)
		}
		if string(got) != c.new {
			t.Fatalf("%s: got %q, want %q", c.name, got, c.new)
		}
		// Zero fuzz: the same diff against a file with one more line on top does not apply.
		if _, err := Apply([]byte("shifted\n"+c.old), fds[0]); err == nil && c.name != "insert at top" {
			t.Errorf("%s: applied to a shifted file", c.name)
		}
	}
	created, err := Parse(gitDiff(t, "new/helper.R", "", "f <- 1\n", false, true))
	if err != nil || !created[0].Create || created[0].Path != "new/helper.R" || created[0].Added != 1 {
		t.Fatalf("creation: %+v %v", created, err)
	}
	if got, err := Apply(nil, created[0]); err != nil || string(got) != "f <- 1\n" {
		t.Fatalf("creation: %q %v", got, err)
	}
	deleted, err := Parse(gitDiff(t, "old.R", "a\nb\n", "", true, false))
	if err != nil || !deleted[0].Delete || deleted[0].Removed != 2 {
		t.Fatalf("deletion: %+v %v", deleted, err)
	}
	if got, err := Apply([]byte("a\nb\n"), deleted[0]); err != nil || len(got) != 0 {
		t.Fatalf("deletion: %q %v", got, err)
	}
}

func TestApplyMismatchNamesHunkAndLine(t *testing.T) {
	d := "--- a/run.R\n+++ b/run.R\n@@ -2,2 +2,2 @@\n x\n-y\n+Y\n"
	fds, err := Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply([]byte("w\nx\nz\n"), fds[0])
	if err == nil || !strings.Contains(err.Error(), "hunk 1 (@@ -2,2 +2,2 @@) does not apply at line 3") || !strings.Contains(err.Error(), `the file has "z"`) {
		t.Fatalf("got %v", err)
	}
	// A hunk beyond the file is refused before anything is allocated for it.
	fds, err = Parse("--- a/run.R\n+++ b/run.R\n@@ -4000000,1 +4000000,1 @@\n-x\n+y\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply([]byte("x\n"), fds[0]); err == nil || !strings.Contains(err.Error(), "the file has 1 lines") {
		t.Fatalf("got %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	hunk := "@@ -1 +1 @@\n-a\n+b\n"
	cases := map[string]struct {
		diff, want string
		refused    bool
	}{
		"mode change":      {"diff --git a/x b/x\nold mode 100644\nnew mode 100755\n", "may not change a file's mode", true},
		"rename":           {"diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n", "rename or copy", true},
		"rename by names":  {"--- a/x\n+++ b/y\n" + hunk, "renames x to y", true},
		"binary":           {"diff --git a/x b/x\nGIT binary patch\nliteral 3\n", "binary", true},
		"binary differ":    {"Binary files a/x and b/x differ\n", "binary", true},
		"symlink created":  {"diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n", "no symlinks", true},
		"escape":           {"--- a/../x\n+++ b/../x\n" + hunk, "not a plain relative path", true},
		"absolute":         {"--- a//etc/passwd\n+++ b//etc/passwd\n" + hunk, "not a plain relative path", true},
		"into .git":        {"--- a/.git/hooks/post-checkout\n+++ b/.git/hooks/post-checkout\n" + hunk, "writes into .git", true},
		"quoted":           {"--- \"a/x\\ty\"\n+++ \"b/x\\ty\"\n" + hunk, "quoted name", true},
		"junk":             {"hello\n--- a/x\n+++ b/x\n" + hunk, "is not part of a unified diff", false},
		"short hunk":       {"--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b\n", "hunk ends early", false},
		"long hunk":        {"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n-c\n+b\n", "more lines than its header", false},
		"huge count":       {"--- a/x\n+++ b/x\n@@ -1,99999999999 +1 @@\n-a\n+b\n", "counts up to", false},
		"empty":            {"", "no file changes", false},
		"twice":            {"--- a/x\n+++ b/x\n" + hunk + "--- a/x\n+++ b/x\n" + hunk, "changed twice", false},
		"bad marker place": {"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n-c\n+b\n+d\n", "not the last line", false},
	}
	for name, c := range cases {
		_, err := Parse(c.diff)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
			continue
		}
		if errors.Is(err, ErrRefused) != c.refused {
			t.Errorf("%s: ErrRefused %v, want %v (%v)", name, errors.Is(err, ErrRefused), c.refused, err)
		}
		if !strings.HasPrefix(err.Error(), "line ") && name != "empty" {
			t.Errorf("%s: error does not name a line: %v", name, err)
		}
	}
}

// TestParseNamesCRLFLineEnds: a diff saved with CRLF line ends is refused
// saying so (not as a name with a control character); a CRLF file's hunk
// lines in an LF diff are still read.
func TestParseNamesCRLFLineEnds(t *testing.T) {
	lf := "diff --git a/code.R b/code.R\n--- a/code.R\n+++ b/code.R\n@@ -1 +1 @@\n-a\n+b\n"
	for _, d := range []string{strings.ReplaceAll(lf, "\n", "\r\n"), strings.ReplaceAll(strings.TrimPrefix(lf, "diff --git a/code.R b/code.R\n"), "\n", "\r\n")} {
		_, err := Parse(d)
		if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the diff has CRLF line ends: save it with LF") || strings.Contains(err.Error(), "control character") {
			t.Errorf("%q: %v", d, err)
		}
	}
	files, err := Parse("--- a/code.R\n+++ b/code.R\n@@ -1 +1 @@\n-a\r\n+b\r\n")
	if err != nil || len(files) != 1 || files[0].Hunks[0].Lines[1].Text != "b\r" {
		t.Fatalf("CRLF file in an LF diff: %+v %v", files, err)
	}
}
