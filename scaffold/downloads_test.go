package scaffold

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// TestInitDownload: --download fetches each URL under the fetch policy,
// pins its SHA-256 in downloads with a name from the URL that is unique
// among the datasets and downloads, and sets spec_version 0.2; a URL the
// policy refuses or that does not serve a file is an error naming it.
func TestInitDownload(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/R/helpers.R":
			w.Write([]byte("f <- function(x) x\n"))
		case "/v2/sleep.csv":
			w.Write([]byte("id,extra\n1,0.7\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.R"), "source(url)\n")
	writeFile(t, filepath.Join(dir, "data/sleep.csv"), "id,extra\n")
	opts := Options{Source: dir, Targets: []string{"t=1"}, Policy: runner.Policy{AllowPrivate: true},
		Downloads: []string{srv.URL + "/R/helpers.R", srv.URL + "/v2/sleep.csv"}}
	res, err := Init(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	want := []dotlab.Download{
		{Name: "helpers.R", URL: srv.URL + "/R/helpers.R", SHA256: sha("f <- function(x) x\n")},
		{Name: "sleep.csv-2", URL: srv.URL + "/v2/sleep.csv", SHA256: sha("id,extra\n1,0.7\n")},
	}
	if m.SpecVersion != dotlab.SpecVersionRuntime || len(m.Downloads) != 2 || m.Downloads[0] != want[0] || m.Downloads[1] != want[1] {
		t.Fatalf("spec %s downloads %+v, want %+v", m.SpecVersion, m.Downloads, want)
	}
	if len(res.Problems) != 0 || !strings.Contains(notesAt(res, "check")["$.downloads[1]"], "sha256 "+want[1].SHA256) {
		t.Errorf("problems %q notes %v", res.Problems, res.Notes)
	}
	for _, c := range []struct {
		url    string
		policy runner.Policy
		want   string
	}{
		{srv.URL + "/missing.csv", runner.Policy{AllowPrivate: true}, "HTTP 404"},
		{srv.URL + "/R/helpers.R", runner.Policy{}, "plain http://"},
		{"https://example.org/a.csv#x", runner.Policy{}, "fragment"},
	} {
		opts.Downloads, opts.Policy = []string{c.url}, c.policy
		if _, err := Init(context.Background(), opts); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--download") {
			t.Errorf("--download %s: err = %v, want one naming --download and %q", c.url, err, c.want)
		}
	}
}
