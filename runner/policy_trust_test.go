package runner

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustCAFileThatCannotBeUsedFailsEveryRequest: a missing file or one
// without a PEM certificate fails requests, naming the setting, rather
// than silently trusting only the system's CAs.
func TestTrustCAFileThatCannotBeUsedFailsEveryRequest(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o644)
	for _, f := range []string{filepath.Join(t.TempDir(), "missing.pem"), junk} {
		req, _ := http.NewRequest("GET", "https://registry.example.org/v2/", nil)
		_, err := Policy{TrustCAFile: f}.Transport().RoundTrip(req)
		if err == nil || !strings.Contains(err.Error(), TrustCAEnv) {
			t.Errorf("%s: %v", f, err)
		}
	}
}
