package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/dotlab/dotlab/runner"
)

// TestTreeSHA256TellsTreesApartWhoseLinesCouldBeSpliced: a tree with one
// file whose name holds a newline and the text of a second entry hashes
// differently from the tree of the two files it spells.
func TestTreeSHA256TellsTreesApartWhoseLinesCouldBeSpliced(t *testing.T) {
	hexSum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	two := t.TempDir()
	os.WriteFile(filepath.Join(two, "a"), []byte("one"), 0o644)
	os.WriteFile(filepath.Join(two, "b"), []byte("two"), 0o644)
	for _, forged := range []string{
		"a\nfile " + hexSum("two") + " b",   // the line format without lengths
		"a\nfile " + hexSum("two") + " 1 b", // the same with the length written in
	} {
		one := t.TempDir()
		if err := os.WriteFile(filepath.Join(one, forged), []byte("one"), 0o644); err != nil {
			t.Fatal(err)
		}
		h1, err1 := runner.TreeSHA256(one)
		h2, err2 := runner.TreeSHA256(two)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if h1 == h2 {
			t.Fatalf("tree {%q} and tree {a, b} both hash to %s", forged, h1)
		}
	}
	h, _ := runner.TreeSHA256(two)
	if want := hexSum("file " + hexSum("one") + " 1 a\nfile " + hexSum("two") + " 1 b\n"); h != want {
		t.Fatalf("tree {a, b} = %s, want %s (docs/manifest-spec.md \"The tree's hash\")", h, want)
	}
}
