package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialsFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg")
	t.Setenv("DOTLAB_CONFIG_DIR", dir)
	t.Setenv("DOTLAB_API_KEY", "")
	p, err := CredentialsPath()
	if err != nil || p != filepath.Join(dir, "agents.json") {
		t.Fatalf("path %q %v", p, err)
	}
	if all, err := LoadCredentials(p); err != nil || len(all) != 0 {
		t.Fatalf("missing file: %v %v, want an empty set", all, err)
	}
	if _, err := Connect("http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "dotlab agent register") {
		t.Fatalf("unregistered: %v", err)
	}
	a := Credentials{AgentID: "ag_1", Name: "ada", APIKey: "dlk_a"}
	b := Credentials{AgentID: "ag_2", Name: "bo", APIKey: "dlk_b"}
	if err := SaveCredentials(p, "http://a", a); err != nil {
		t.Fatal(err)
	}
	if err := SaveCredentials(p, "http://b", b); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v %v, want 0600", st.Mode().Perm(), err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", st.Mode().Perm())
	}
	all, err := LoadCredentials(p)
	if err != nil || all["http://a"] != a || all["http://b"] != b {
		t.Fatalf("read back %+v %v", all, err)
	}
	data, _ := os.ReadFile(p)
	for _, key := range []string{`"agent_id": "ag_1"`, `"name": "ada"`, `"api_key": "dlk_a"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("file lacks %s:\n%s", key, data)
		}
	}
	if _, err := Connect("http://a"); err != nil {
		t.Fatalf("registered: %v", err)
	}
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("corrupt file: %v", err)
	}
}

// TestResolveServerAndKey: the server is the flag, else $DOTLAB_SERVER,
// else the one server registered in the config dir; with none or several
// the error says how to choose. The key is $DOTLAB_API_KEY, else the one
// stored for the server, and no error names it.
func TestResolveServerAndKey(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOTLAB_CONFIG_DIR", dir)
	t.Setenv("DOTLAB_API_KEY", "")
	t.Setenv(ServerEnv, "")
	if _, err := ResolveServer(""); err == nil || !strings.Contains(err.Error(), "--server") || !strings.Contains(err.Error(), ServerEnv) {
		t.Fatalf("nothing registered: %v", err)
	}
	p, _ := CredentialsPath()
	if err := SaveCredentials(p, "http://a:1", Credentials{AgentID: "ag_1", APIKey: "dlk_secret_a"}); err != nil {
		t.Fatal(err)
	}
	if s, err := ResolveServer(""); err != nil || s != "http://a:1" {
		t.Fatalf("one registered: %q %v", s, err)
	}
	if k, err := Key("http://a:1"); err != nil || k != "dlk_secret_a" {
		t.Fatalf("key: %q %v", k, err)
	}
	SaveCredentials(p, "http://b:2", Credentials{AgentID: "ag_2", APIKey: "dlk_secret_b"})
	if _, err := ResolveServer(""); err == nil || !strings.Contains(err.Error(), "http://a:1, http://b:2") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("two registered: %v", err)
	}
	t.Setenv(ServerEnv, "http://b:2")
	if s, err := ResolveServer(""); err != nil || s != "http://b:2" {
		t.Fatalf("from the environment: %q %v", s, err)
	}
	if s, err := ResolveServer("http://c:3"); err != nil || s != "http://c:3" {
		t.Fatalf("from the flag: %q %v", s, err)
	}
	if _, err := Key("http://c:3"); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "dotlab agent register") {
		t.Fatalf("key of an unregistered server: %v", err)
	}
	t.Setenv("DOTLAB_API_KEY", "dlk_from_env")
	if k, err := Key("http://c:3"); err != nil || k != "dlk_from_env" {
		t.Fatalf("key from the environment: %q %v", k, err)
	}
	if got := SplitCapabilities(" python, ,r,"); strings.Join(got, "|") != "python|r" {
		t.Fatalf("SplitCapabilities: %q", got)
	}
}
