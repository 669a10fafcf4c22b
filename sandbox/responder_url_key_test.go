package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// TestResponderMatchesTheEscapedPath: the real responder process, pinning
// http://data.example.org/a%3Fb.csv, answers that URL (in either hex case)
// and an encoded unreserved character, but not /a?b.csv (path /a, query
// b.csv: another resource of the origin) nor /a%2F… for /a/….
func TestResponderMatchesTheEscapedPath(t *testing.T) {
	testfix.Need(t, true)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "blob")
	os.WriteFile(file, []byte("pinned bytes"), 0o400)
	bundle := filepath.Join(dir, "bundle")
	os.Mkdir(bundle, 0o700)
	rr, err := startResponder(exe, bundle, []Download{{URL: "http://data.example.org/a%3Fb.csv", File: file}, {URL: "http://data.example.org/d/e.csv", File: file}},
		time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rr.stop() })
	for target, status := range map[string]int{
		"http://data.example.org/a%3Fb.csv":   200,
		"http://data.example.org/a%3fb.csv":   200,
		"http://data.example.org/%61%3Fb.csv": 200,
		"http://data.example.org/a?b.csv":     403,
		"http://data.example.org/d/e.csv":     200,
		"http://data.example.org/d%2Fe.csv":   403,
	} {
		resp, body := roundTrip(t, rr, "GET "+target+" HTTP/1.1\r\nHost: data.example.org\r\n\r\n")
		if resp.StatusCode != status || status == 200 && body != "pinned bytes" || status == 403 && !strings.Contains(body, "not pinned") {
			t.Errorf("GET %s: %d %.120q, want %d", target, resp.StatusCode, body, status)
		}
	}
}
