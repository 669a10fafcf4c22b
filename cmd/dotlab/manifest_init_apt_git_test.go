package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// TestManifestInitAptTxtIntoAGitPackage: --write-apt-txt into a package
// pinned by a git commit says the commit does not hold the apt.txt; run
// again, the file already holding the offer is no error.
func TestManifestInitAptTxtIntoAGitPackage(t *testing.T) {
	testfix.Need(t, false, "python3", "git")
	sources := contentsMirror(t, "usr/lib/python3/dist-packages/sklearn/__init__.py python/python3-sklearn\n")
	pkg := t.TempDir()
	os.WriteFile(filepath.Join(pkg, "main.py"), []byte("import sklearn\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "main.py"}, {"-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "code"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = pkg
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	head, _ := exec.Command("git", "-C", pkg, "rev-parse", "HEAD").Output()
	commit := strings.TrimSpace(string(head))
	apt := filepath.Join(pkg, "apt.txt")
	args := []string{"manifest", "init", pkg, "--target", "x=1", "--cache", t.TempDir(), "--apt-sources", sources, "--allow-private-urls", "--write-apt-txt", apt}
	_, errOut, code := runCLI(t, args...)
	want := "$.code.commit: check: commit apt.txt: commit " + commit + " does not hold it"
	if code != 0 || !strings.Contains(errOut, "apt.txt written to "+apt) || !strings.Contains(errOut, want) {
		t.Fatalf("first run: code %d\n%s", code, errOut)
	}
	_, errOut, code = runCLI(t, args...)
	if code != 0 || !strings.Contains(errOut, apt+" already holds the offer") || !strings.Contains(errOut, want) {
		t.Fatalf("second run: code %d\n%s", code, errOut)
	}
	// Committed: nothing to add, because the package's apt.txt has it.
	for _, a := range [][]string{{"add", "apt.txt"}, {"-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "apt"}} {
		if out, err := exec.Command("git", append([]string{"-C", pkg}, a...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", a, err, out)
		}
	}
	_, errOut, code = runCLI(t, args...)
	if code != 0 || !strings.Contains(errOut, "nothing to add ("+apt+" not written): the package's apt.txt already names") || strings.Contains(errOut, "does not hold it") {
		t.Fatalf("third run: code %d\n%s", code, errOut)
	}
}
