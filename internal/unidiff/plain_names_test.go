package unidiff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseReadsDiffUPlainNames: `diff -u main.R.orig main.R` (plain
// names, no a/ b/ prefix, timestamps after a tab) patches main.R, the +++
// file, and applies; a plain name beside a prefixed one is an error that
// says what to run.
func TestParseReadsDiffUPlainNames(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("needs diff")
	}
	dir := t.TempDir()
	old, new := "library(x)\nsetwd(choose.dir())\nfit()\n", "library(x)\nfit()\n"
	os.WriteFile(filepath.Join(dir, "main.R.orig"), []byte(old), 0o644)
	os.WriteFile(filepath.Join(dir, "main.R"), []byte(new), 0o644)
	cmd := exec.Command("diff", "-u", "main.R.orig", "main.R")
	cmd.Dir = dir
	out, _ := cmd.Output() // exit status 1 means "differs"
	files, err := Parse(string(out))
	if err != nil {
		t.Fatalf("diff -u output refused: %v\n%s", err, out)
	}
	if len(files) != 1 || files[0].Path != "main.R" || files[0].Create || files[0].Delete {
		t.Fatalf("files %+v", files)
	}
	got, err := Apply([]byte(old), files[0])
	if err != nil || string(got) != new {
		t.Fatalf("applied: %q, %v", got, err)
	}
	_, err = Parse("--- main.R.orig\n+++ b/main.R\n@@ -1 +1 @@\n-a\n+b\n")
	if err == nil || !strings.Contains(err.Error(), "git diff") || !strings.Contains(err.Error(), "diff -u a/analysis.R b/analysis.R") {
		t.Errorf("mixed names: %v", err)
	}
}
