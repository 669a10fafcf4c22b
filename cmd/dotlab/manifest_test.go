package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
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

func TestManifestInit(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.R"), []byte("cat('did', 2.76)\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "panel.csv"), []byte("id,y\n"), 0o644)
	// Placeholders only: written, exit 0, every field left on stderr by path.
	out, errOut, code := runCLI(t, "manifest", "init", "--no-archive", dir, "--target", "did=2.76", "--source", `did=stdout:regex:did\s+([-0-9.]+)`)
	if code != 0 || !strings.Contains(out, `"value": 0.005`) || !strings.Contains(errOut, "manifest: $.datasets[0].url: placeholder: ") ||
		!strings.Contains(errOut, "$.environment.image: placeholder: an R package") || !strings.Contains(errOut, "not yet valid: 4 fields left for you that fail validation, and 2 free-text placeholders (title, citation)") {
		t.Fatalf("code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// --out writes a new file, never over an existing one; filled in, it validates.
	mf := filepath.Join(t.TempDir(), "m.json")
	_, errOut, code = runCLI(t, "manifest", "init", "--no-archive", dir, "--out", mf, "--target", "did=2.76", "--title", "T", "--citation", "C", "--entrypoint", "Rscript main.R",
		"--image", "dotlab.example/r@sha256:"+strings.Repeat("0a", 32), "--data-url", "https://zenodo.org/records/1/files", "--archive", filepath.Join(dir, "main.R"))
	if code != 0 || !strings.Contains(errOut, mf+": not yet valid: 1 field left for you that fails validation (") || !strings.Contains(errOut, mf+": $.code.archive.url: placeholder") {
		t.Fatalf("code %d stderr %s", code, errOut)
	}
	if _, _, code := runCLI(t, "manifest", "validate", mf); code != 1 {
		t.Fatalf("validate: %d (the archive URL is still a placeholder)", code)
	}
	if _, errOut, code = runCLI(t, "manifest", "init", "--no-archive", dir, "--out", mf, "--target", "did=2.76"); code != 2 || !strings.Contains(errOut, "not overwritten") {
		t.Fatalf("overwrite: code %d stderr %s", code, errOut)
	}
	// A real problem (a data path with a space) beyond the placeholders: exit 1, still written.
	os.WriteFile(filepath.Join(dir, "data", "wave 2.csv"), []byte("x\n"), 0o644)
	out, errOut, code = runCLI(t, "manifest", "init", "--no-archive", dir, "--target", "did=2.76")
	if code != 1 || out == "" || !strings.Contains(errOut, "invalid: $.datasets[1].path") {
		t.Fatalf("code %d stderr %s", code, errOut)
	}
	if _, _, code = runCLI(t, "manifest", "init", "--no-archive", filepath.Join(dir, "nope")); code != 2 {
		t.Fatalf("missing dir: %d", code)
	}
}
