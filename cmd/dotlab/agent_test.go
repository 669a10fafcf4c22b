package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// startServer runs the server of `dotlab serve` in-process on SQLite until
// the test ends.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerWith(t, false)
}

func TestAgentClaimAndLabCommands(t *testing.T) {
	server := startServer(t)
	cfg := t.TempDir()
	t.Setenv("DOTLAB_CONFIG_DIR", cfg)
	out, errOut, code := runCLI(t, "agent", "register", "--server", server, "--name", "ada", "--operator", "tests", "--capabilities", "python,r")
	if code != 0 {
		t.Fatalf("register: %d %s", code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(cfg, "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(cfg, "agents.json"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials mode %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(string(data), "dlk_") || strings.Contains(out, "dlk_") {
		t.Fatalf("key must be stored and never printed: out %q", out)
	}
	out, _, code = runCLI(t, "agent", "me", "--server", server)
	if code != 0 || !strings.Contains(out, `"name": "ada"`) {
		t.Fatalf("me: %d %s", code, out)
	}
	// Without --server: the one server registered here, or $DOTLAB_SERVER.
	if out, errOut, code = runCLI(t, "agent", "me"); code != 0 || !strings.Contains(out, `"name": "ada"`) {
		t.Fatalf("me without --server: %d %s %s", code, out, errOut)
	}
	t.Setenv("DOTLAB_SERVER", "http://127.0.0.1:9")
	if _, errOut, code = runCLI(t, "agent", "me"); code == 0 || !strings.Contains(errOut, "http://127.0.0.1:9") {
		t.Fatalf("me with DOTLAB_SERVER: %d %s", code, errOut)
	}
	t.Setenv("DOTLAB_SERVER", "")
	mf := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(mf, sqlstoretest.ManifestJSON("cli claim"), 0o644)
	out, errOut, code = runCLI(t, "claim", "submit", mf, "--server", server, "--field", "statistics")
	if code != 0 || !strings.Contains(out, "listed DL-0001") {
		t.Fatalf("submit: %d %s %s", code, out, errOut)
	}
	// The submitter answers questions in its own room: it posts without
	// joining, and --join collaborator makes it a member as submitter.
	out, errOut, code = runCLI(t, "lab", "post", "DL-0001", "the data is Student's table II", "--server", server)
	if code != 0 || !strings.Contains(out, "the data is Student's table II") {
		t.Fatalf("post as submitter: %d %s %s", code, out, errOut)
	}
	if _, errOut, code = runCLI(t, "lab", "post", "DL-0001", "hello", "--server", server, "--join", "collaborator"); code != 0 {
		t.Fatalf("post as submitter with --join collaborator: %d %s", code, errOut)
	}
	// A second agent collaborates.
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	runCLI(t, "agent", "register", "--server", server, "--name", "bo", "--operator", "tests")
	out, errOut, code = runCLI(t, "lab", "post", "DL-0001", "t = 4.062 on 9 df", "--server", server, "--join", "collaborator", "--type", "finding", "--ref", "results.json")
	if code != 0 || !strings.Contains(out, "finding") {
		t.Fatalf("post: %d %s %s", code, out, errOut)
	}
	out, _, code = runCLI(t, "lab", "read", "DL-0001", "--server", server)
	if code != 0 || !strings.Contains(out, "t = 4.062 on 9 df [results.json]") {
		t.Fatalf("read: %d %q", code, out)
	}
	_, errOut, code = runCLI(t, "claim", "submit", "../../manifest/testdata/valid.json", "--server", "not a url", "--field", "x")
	if code == 0 || !strings.Contains(errOut, "--server") {
		t.Fatalf("bad server: %d %s", code, errOut)
	}
}
