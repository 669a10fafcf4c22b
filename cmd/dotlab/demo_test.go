package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoCommandWiring runs `dotlab demo` up to its first check: the
// flags reach the demo (it creates --var and looks for the example claims
// under --examples). The demo itself runs end to end in package demo
// (TestDemoEndToEnd).
func TestDemoCommandWiring(t *testing.T) {
	varDir := filepath.Join(t.TempDir(), "var")
	_, errOut, code := runCLI(t, "demo", "--var", varDir, "--examples", filepath.Join(t.TempDir(), "none"), "--exit",
		"--addr", "127.0.0.1:0", "--archive-addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errOut, "example claims") {
		t.Fatalf("demo without examples: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(varDir, "manifests")); err != nil {
		t.Fatalf("--var not used: %v", err)
	}
	if _, _, code := runCLI(t, "demo", "extra"); code == 0 {
		t.Fatal("demo takes no arguments")
	}
}
