package main

import (
	"os"
	"path/filepath"
	"regexp"
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
