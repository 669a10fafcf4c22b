package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/runner"
)

// TestManifestInitDownloadTrustsDotlabTrustCA: `manifest init --download`
// of an https URL whose certificate a private CA signed fails without the
// CA and pins the file with DOTLAB_TRUST_CA naming it, as rerun does.
func TestManifestInitDownloadTrustsDotlabTrustCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("x,y\n1,2\n")) }))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.py"), []byte("print(1)\n"), 0o644)
	url := srv.URL + "/table.csv"
	args := []string{"manifest", "init", "--no-archive", dir, "--download", url, "--allow-private-urls"}
	t.Setenv(runner.TrustCAEnv, "")
	if _, errOut, code := runCLI(t, args...); code == 0 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("without the CA: exit %d %s", code, errOut)
	}
	t.Setenv(runner.TrustCAEnv, ca)
	out, errOut, code := runCLI(t, args...)
	if code != 0 || !strings.Contains(out, `"url": "`+url+`"`) {
		t.Fatalf("with DOTLAB_TRUST_CA: exit %d\n%s\n%s", code, out, errOut)
	}
}
