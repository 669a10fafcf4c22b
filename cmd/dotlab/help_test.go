package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpTexts: every help(NAME) the commands call has its file in
// help/, and every file there is used.
func TestHelpTexts(t *testing.T) {
	used := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	call := regexp.MustCompile(`help\("([a-z-]+)"\)`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(data), -1) {
			used[m[1]] = true
			if help(m[1]) == "" {
				t.Errorf("%s: help of %q has no text in help/%s.txt", f, m[1], m[1])
			}
		}
	}
	texts, _ := filepath.Glob(filepath.Join("help", "*.txt"))
	for _, p := range texts {
		name := filepath.Base(p)
		name = name[:len(name)-len(".txt")]
		if !used[name] {
			t.Errorf("help/%s.txt is used by no command", name)
		}
	}
	if len(used) < 10 {
		t.Fatalf("only %d help texts found", len(used))
	}
}

// TestHelpNamesBothSpecVersionsAndWhatClaimDoes: manifest help names spec
// v0.2 beside v0.1, and claim's summary offers only what its subcommands
// do (submit, show).
func TestHelpNamesBothSpecVersionsAndWhatClaimDoes(t *testing.T) {
	for _, args := range [][]string{{"manifest", "--help"}, {"manifest", "validate", "--help"}} {
		out, _, _ := runCLI(t, args...)
		if !strings.Contains(out, "spec v0.1 or v0.2") {
			t.Errorf("%v lacks spec v0.1 or v0.2:\n%s", args, out)
		}
	}
	out, _, _ := runCLI(t, "claim", "--help")
	if strings.Contains(out, "List claims") || !strings.Contains(out, "show") {
		t.Errorf("claim --help:\n%s", out)
	}
}
