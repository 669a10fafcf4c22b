package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/cli"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		errb.WriteString(err.Error())
		return out.String(), errb.String(), cli.ExitCode(err)
	}
	return out.String(), errb.String(), 0
}

func TestManifestValidateAndHash(t *testing.T) {
	good := "../../manifest/testdata/valid.json"
	out, _, code := runCLI(t, "manifest", "validate", good)
	if code != 0 || !strings.Contains(out, "valid manifest") {
		t.Fatalf("valid: code %d out %q", code, out)
	}
	data, _ := os.ReadFile(good)
	bad := strings.Replace(strings.Replace(string(data), `"3.11.2"`, `">=3.11"`, 1), `"0.0005"`, `-1`, 1)
	bad = strings.Replace(bad, `"seed": 1908`, `"seed": 1908, "Seed": 2`, 1)
	p := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(p, []byte(bad), 0o644)
	_, errOut, code := runCLI(t, "manifest", "validate", p)
	if code != 1 || !strings.Contains(errOut, p+": $.Seed") {
		t.Fatalf("invalid: code %d stderr %q", code, errOut)
	}
	h1, _, code := runCLI(t, "manifest", "hash", good)
	if code != 0 || len(strings.TrimSpace(h1)) != 64 {
		t.Fatalf("hash: %q %d", h1, code)
	}
	// Reformatting does not change the identity.
	p2 := filepath.Join(t.TempDir(), "same.json")
	os.WriteFile(p2, []byte(strings.Join(strings.Fields(string(data)), " ")), 0o644)
	h2, _, _ := runCLI(t, "manifest", "hash", p2)
	if h1 != h2 {
		t.Fatalf("hash changed with whitespace: %s vs %s", h1, h2)
	}
}
