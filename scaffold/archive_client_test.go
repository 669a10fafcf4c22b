package scaffold

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dotlab/dotlab/runner"
)

// TestImageCodenameIsCheckedBeforeItNamesASuite: a VERSION_CODENAME that
// is not a codename is dropped, and a suite, component or architecture that
// could change the URL is refused before any request.
func TestImageCodenameIsCheckedBeforeItNamesASuite(t *testing.T) {
	for codename, want := range map[string]string{"bookworm": "bookworm", "../../../private/x?steal=1&": "", "sid#x": "", "Bookworm": "", strings.Repeat("a", 33): "", "trixie-backports": "trixie-backports"} {
		rootfs := t.TempDir()
		os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755)
		os.WriteFile(filepath.Join(rootfs, "etc/os-release"), []byte("ID=debian\nVERSION_CODENAME=\""+codename+"\"\n"), 0o644)
		if got := readOSRelease(rootfs); got != want {
			t.Errorf("VERSION_CODENAME=%q read as %q, want %q", codename, got, want)
		}
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); http.NotFound(w, r) }))
	defer srv.Close()
	client := archiveClient(runner.Policy{AllowPrivate: true})
	for _, c := range [][3]string{{"../../x?y=1", "main", "amd64"}, {"bookworm", "main/../../x", "amd64"}, {"bookworm", "main", "amd64?x"}, {"..", "main", "amd64"}, {"bookworm", "main", "%2e%2e"}} {
		if _, err := contentsIndex(context.Background(), client, srv.URL+"/debian", c[0], []string{c[1]}, c[2], ""); err == nil || !strings.Contains(err.Error(), "not put into a mirror URL") {
			t.Errorf("%q: %v", c, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests made with a refused suite", n)
	}
}

// TestArchiveClientIsUnderTheFetchPolicy: the Contents client dials no
// loopback mirror under the strict policy, follows no redirect to a
// link-local (metadata) address even with --allow-private-urls, and no
// redirect to another host or from https to http.
func TestArchiveClientIsUnderTheFetchPolicy(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer srv.Close()
	if _, err := archiveClient(runner.Policy{}).Get(srv.URL + "/debian/dists/bookworm/Release"); err == nil || !strings.Contains(err.Error(), "refused by the fetch policy") || requests.Load() != 0 {
		t.Fatalf("strict policy reached a loopback mirror: %v (%d requests)", err, requests.Load())
	}
	if _, err := archiveClient(runner.Policy{AllowPrivate: true}).Get(srv.URL + "/debian/dists/bookworm/Release"); err == nil || !strings.Contains(err.Error(), "169.254.169.254") || requests.Load() != 1 {
		t.Fatalf("redirect to the metadata address: %v (%d requests)", err, requests.Load())
	}
	hop := func(raw string) *http.Request { u, _ := url.Parse(raw); return &http.Request{URL: u} }
	strict, private := archiveClient(runner.Policy{}).CheckRedirect, archiveClient(runner.Policy{AllowPrivate: true}).CheckRedirect
	via := []*http.Request{hop("http://deb.example.org/debian/dists/bookworm/Release")}
	if err := strict(hop("http://deb.example.org/debian/x"), via); err != nil {
		t.Errorf("same host: %v", err)
	}
	if err := strict(hop("http://elsewhere.example.net/x"), via); err == nil {
		t.Error("strict: redirect to another host followed")
	}
	if err := private(hop("http://elsewhere.example.net/x"), via); err != nil {
		t.Errorf("--allow-private-urls: redirect to another host: %v", err)
	}
	if err := private(hop("http://deb.example.org/x"), []*http.Request{hop("https://deb.example.org/x")}); err == nil {
		t.Error("redirect from https to http followed")
	}
	if err := private(hop("file:///etc/passwd"), via); err == nil {
		t.Error("redirect to file: followed")
	}
	long := make([]*http.Request, runner.MaxRedirects+1)
	for i := range long {
		long[i] = via[0]
	}
	if err := strict(hop("http://deb.example.org/x"), long); err == nil {
		t.Errorf("redirect %d followed", len(long))
	}
}
