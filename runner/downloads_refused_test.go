package runner

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/sandbox"
)

// TestRefusedRequestsForTheSummary: the rerun summary's refused requests
// keep a URL's whole query (the author pins exactly that URL), hide
// userinfo, name a refused CONNECT's host, and skip served requests; the
// log hint for a refused CONNECT says no URL on the host is pinned.
func TestRefusedRequestsForTheSummary(t *testing.T) {
	events := []sandbox.ResponderEvent{
		{Method: "GET", URL: "http://data.example.org/f.csv?v=2&x=1", Status: 403, Refused: "not pinned"},
		{Method: "GET", URL: "http://data.example.org/ok.csv", Status: 200, Bytes: 3},
		{Method: "CONNECT", URL: "https://example.org:443/", Status: 403, Refused: "host"},
		{Method: "GET", URL: "http://u:secret@h.example.org/p", Status: 403, Refused: "not pinned"},
	}
	got := strings.Join(refusedRequests(events), "\n")
	want := "GET http://data.example.org/f.csv?v=2&x=1 (not pinned)\nCONNECT example.org:443 (no URL on this host is pinned)\nGET http://u:xxxxx@h.example.org/p (not pinned)"
	if got != want {
		t.Errorf("refused:\n%s\nwant:\n%s", got, want)
	}
	hint := refusalHint(events[2])
	for _, part := range []string{"no URL on example.org:443 is pinned", "downloads", "dotlab manifest init --download URL"} {
		if !strings.Contains(hint, part) {
			t.Errorf("CONNECT hint lacks %q: %s", part, hint)
		}
	}
}

// TestTrustHintOnAnUntrustedCertificate: a download refused for its
// server's certificate names DOTLAB_TRUST_CA; other errors get no hint.
func TestTrustHintOnAnUntrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, err := (&http.Client{}).Get(srv.URL)
	if err == nil {
		t.Fatal("the test server's certificate was trusted")
	}
	if h := trustHint(fmt.Errorf("fetch: %w", err)); !strings.Contains(h, TrustCAEnv+"=FILE") {
		t.Errorf("hint %q for %v", h, err)
	}
	if h := trustHint(errors.New("HTTP 404")); h != "" {
		t.Errorf("hint %q for a 404", h)
	}
}
