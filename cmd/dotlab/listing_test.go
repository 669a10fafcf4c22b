package main

import (
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/sqlstore"
)

// startServerWith runs the server of `dotlab serve` in-process on a SQLite
// file, listing private URLs when allowPrivateURLs.
func startServerWith(t *testing.T, allowPrivateURLs bool) string {
	t.Helper()
	return servertest.Start(t, server.Config{DB: sqlstoretest.URL(t, sqlstore.SQLite), Windows: dotlab.DefaultWindows,
		SettleEvery: 100 * time.Millisecond, AllowPrivateURLs: allowPrivateURLs})
}

func writeManifest(t *testing.T, title, dataURL string) string {
	t.Helper()
	raw := strings.Replace(string(sqlstoretest.ManifestJSON(title)), "https://data.example.org/sleep.csv", dataURL, 1)
	p := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClaimSubmitListingRules: `dotlab claim submit` refuses locally, by
// path, what the server refuses at listing, before any request; with
// --allow-private-urls it defers private addresses to the server, which
// lists them only when it runs with --allow-private-urls.
func TestClaimSubmitListingRules(t *testing.T) {
	public := startServerWith(t, false)
	private := startServerWith(t, true)
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	for _, srv := range []string{public, private} {
		if _, errOut, code := runCLI(t, "agent", "register", "--server", srv, "--name", "sub", "--operator", "tests"); code != 0 {
			t.Fatalf("register: %s", errOut)
		}
	}
	for i, bad := range []string{"file:///etc/passwd", "https://u:p@data.example.org/x", "https://169.254.169.254/x", "https://2130706433/x", "http://127.0.0.1:8090/sleep.csv"} {
		mf := writeManifest(t, "hostile "+bad, bad)
		_, errOut, code := runCLI(t, "claim", "submit", mf, "--server", public, "--field", "statistics")
		if code != 1 || !strings.Contains(errOut, mf+": $.datasets[0].url: ") || !strings.Contains(errOut, "not submitted") {
			t.Errorf("%d: submit %s: exit %d, stderr %q; want exit 1 naming %s: $.datasets[0].url", i, bad, code, errOut, mf)
		}
		if strings.Contains(errOut, "u:p@") {
			t.Errorf("the refusal repeats URL credentials: %q", errOut)
		}
	}
	if _, errOut, code := runCLI(t, "claim", "show", "DL-0001", "--server", public); code == 0 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("a refused manifest reached the server: %d %s", code, errOut)
	}
	// Loopback data: the public server still refuses it (422 by path), the
	// private one lists it.
	mf := writeManifest(t, "demo-style loopback data", "http://127.0.0.1:8090/sleep.csv")
	_, errOut, code := runCLI(t, "claim", "submit", mf, "--server", public, "--field", "statistics", "--allow-private-urls")
	if code == 0 || !strings.Contains(errOut, "server says invalid: manifest: $.datasets[0].url: ") {
		t.Fatalf("public server: exit %d %s", code, errOut)
	}
	out, errOut, code := runCLI(t, "claim", "submit", mf, "--server", private, "--field", "statistics", "--allow-private-urls")
	if code != 0 || !strings.Contains(out, "listed DL-0001") {
		t.Fatalf("private server: exit %d %s %s", code, out, errOut)
	}
	// Its image is at a registry that does not serve it: a warning, not a failure.
	if !strings.Contains(errOut, "$.environment.image: ") || !strings.Contains(errOut, "push it with dotlab image push") {
		t.Errorf("submit of an image no registry serves: no warning in %q", errOut)
	}
	// The metadata address is refused by the private server too.
	mf = writeManifest(t, "metadata", "http://169.254.169.254/latest/meta-data/")
	if _, errOut, code := runCLI(t, "claim", "submit", mf, "--server", private, "--field", "statistics", "--allow-private-urls"); code != 1 || !strings.Contains(errOut, "$.datasets[0].url: ") {
		t.Fatalf("metadata on the private server: exit %d %s", code, errOut)
	}
}

// TestManifestValidateWarnsUnlistable: a valid manifest naming a local file
// (fine for one's own rerun) validates, exit 0, with a warning by path.
func TestManifestValidateWarnsUnlistable(t *testing.T) {
	mf := writeManifest(t, "local data", "file:///srv/data/sleep.csv")
	out, errOut, code := runCLI(t, "manifest", "validate", mf)
	if code != 0 || !strings.Contains(out, "valid manifest") || !strings.Contains(errOut, mf+": warning: not listable: $.datasets[0].url: ") {
		t.Fatalf("validate: exit %d out %q err %q", code, out, errOut)
	}
	// (Its image, at registry.example.org, cannot be pulled: that is the
	// other warning, image_package_test.go's.)
	_, errOut, _ = runCLI(t, "manifest", "validate", "../../manifest/testdata/valid.json")
	if strings.Contains(errOut, "warning: not listable") {
		t.Fatalf("a listable manifest got a warning: %q", errOut)
	}
}

func TestServeHasAllowPrivateURLsFlag(t *testing.T) {
	f := newServeCmd().Flags().Lookup("allow-private-urls")
	if f == nil || f.DefValue != "false" {
		t.Fatalf("serve --allow-private-urls: %+v, want a flag off by default", f)
	}
}
