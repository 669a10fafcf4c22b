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
