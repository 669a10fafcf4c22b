package manifest_test

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// TestCheckListing: every field a runner fetches is held to the listing
// rules, each refusal addressed by its JSON path; Parse alone still accepts
// them (a local rerun of one's own manifest may name local files).
func TestCheckListing(t *testing.T) {
	const img = "registry.example.org/lab/python@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		old, new string
		path     string // "" listable strictly
		private  bool   // listable with allowPrivate
	}{
		{"", "", "", true},
		{"https://example.org/sleep.csv", "file:///etc/passwd", "$.datasets[0].url", false},
		{"https://example.org/sleep.csv", "https://u:p@example.org/sleep.csv", "$.datasets[0].url", false},
		{"https://example.org/sleep.csv", "https://169.254.169.254/x", "$.datasets[0].url", false},
		{"https://example.org/sleep.csv", "https://2130706433/x", "$.datasets[0].url", false},
		{"https://example.org/sleep.csv", "http://127.0.0.1:8090/sleep.csv", "$.datasets[0].url", true},
		{"https://example.org/sleep.csv", "https://[::ffff:10.0.0.1]/sleep.csv", "$.datasets[0].url", true},
		{"https://example.org/lab/sleep-analysis.git", "/etc/passwd", "$.code.repository", false},
		{"https://example.org/lab/sleep-analysis.git", "file:///srv/repo.git", "$.code.repository", false},
		{"https://example.org/lab/sleep-analysis.git", "git://10.0.0.1/r.git", "$.code.repository", true},
		{"https://example.org/lab/sleep-analysis.git", "https://0x7f.1/r.git", "$.code.repository", false},
		{img, strings.Replace(img, "registry.example.org", "127.0.0.1:5000", 1), "$.environment.image", true},
		{img, strings.Replace(img, "registry.example.org", "169.254.169.254", 1), "$.environment.image", false},
		{img, strings.Replace(img, "registry.example.org", "0x7f.1", 1), "$.environment.image", false},
	} {
		text := strings.Replace(valid(t), c.old, c.new, 1)
		m, err := manifest.Parse([]byte(text))
		if err != nil {
			t.Fatalf("%s: Parse: %v", c.new, err)
		}
		err = manifest.CheckListing(m, false)
		if c.path == "" {
			if err != nil {
				t.Errorf("valid manifest not listable: %v", err)
			}
			continue
		}
		d := dotlab.ErrorDetail(err)
		if dotlab.ErrorCode(err) != dotlab.EINVALID || len(d) != 1 || !strings.HasPrefix(d[0], c.path+": ") {
			t.Errorf("%s: CheckListing = %v, want one EINVALID problem at %s", c.new, err, c.path)
		}
		if err := manifest.CheckListing(m, true); (err == nil) != c.private {
			t.Errorf("%s: CheckListing(allowPrivate) = %v, want listable=%v", c.new, err, c.private)
		}
	}
}

// TestCheckListingArchive: a code archive URL is held to the same rules.
func TestCheckListingArchive(t *testing.T) {
	text := strings.Replace(valid(t), `"code": {"repository": "https://example.org/lab/sleep-analysis.git", "commit": "0123456789abcdef0123456789abcdef01234567"}`,
		`"code": {"archive": {"url": "https://[::ffff:169.254.169.254]/code.tar.gz", "sha256": "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"}}`, 1)
	m, err := manifest.Parse([]byte(text))
	if err != nil || m.Code.Archive == nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, private := range []bool{false, true} {
		d := dotlab.ErrorDetail(manifest.CheckListing(m, private))
		if len(d) != 1 || !strings.HasPrefix(d[0], "$.code.archive.url: ") || !strings.Contains(d[0], "169.254.169.254") {
			t.Errorf("allowPrivate=%v: %q, want one refusal at $.code.archive.url", private, d)
		}
	}
}
