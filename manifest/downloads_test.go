package manifest_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// withDownloads is testdata/valid.json as spec v0.2 with downloads (a JSON
// array's items).
func withDownloads(t *testing.T, items string) string {
	t.Helper()
	in := strings.Replace(valid(t), `"spec_version": "0.1"`, `"spec_version": "0.2"`, 1)
	return strings.Replace(in, `"code": {`, `"downloads": [`+items+`], "code": {`, 1)
}

func download(name, url string) string {
	return `{"name": "` + name + `", "url": "` + url + `", "sha256": "` + strings.Repeat("c", 64) + `"}`
}

// TestDownloadRules: a download's name is unique among the datasets,
// helpers and downloads; its URL is http(s) with no fragment; no two
// downloads name the same URL, compared as the sandbox's responder
// compares requests (scheme and host case, default port).
func TestDownloadRules(t *testing.T) {
	cases := []struct {
		name, items, path, want string
	}{
		{"name of a dataset", download("sleep", "https://example.org/a.R"), "$.downloads[0].name", "also $.datasets[0]"},
		{"name twice", download("a", "https://example.org/a.R") + "," + download("a", "https://example.org/b.R"), "$.downloads[1].name", "also $.downloads[0]"},
		{"same URL spelled twice", download("a", "https://example.org/x/a.R") + "," + download("b", "https://Example.ORG:443/x/a.R"), "$.downloads[1].url", "the same URL as $.downloads[0].url"},
		{"fragment", download("a", "https://example.org/a.R#top"), "$.downloads[0].url", "fragment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := manifest.Parse([]byte(withDownloads(t, c.items)))
			detail := strings.Join(dotlab.ErrorDetail(err), "\n")
			if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(detail, c.path+": ") || !strings.Contains(detail, c.want) {
				t.Errorf("err = %v, want invalid at %s saying %q", detail, c.path, c.want)
			}
		})
	}
	ok := withDownloads(t, download("helpers", "https://example.org/R/helpers.R")+","+download("trial", "https://example.org/R/helpers.R?v=2"))
	m, err := manifest.Parse([]byte(ok))
	if err != nil {
		t.Fatalf("two downloads differing by query: %v", err)
	}
	if len(m.Downloads) != 2 || m.Downloads[1].URL != "https://example.org/R/helpers.R?v=2" {
		t.Errorf("downloads = %+v", m.Downloads)
	}
}

// TestDownloadListing: a listed manifest's download URLs are held to the
// fetch rules like datasets' (https, public hosts).
func TestDownloadListing(t *testing.T) {
	m, err := manifest.Parse([]byte(withDownloads(t, download("a", "http://127.0.0.1:8080/a.csv"))))
	if err != nil {
		t.Fatal(err)
	}
	err = manifest.CheckListing(m, false)
	if !strings.Contains(strings.Join(dotlab.ErrorDetail(err), "\n"), "$.downloads[0].url: ") {
		t.Errorf("CheckListing = %v, want $.downloads[0].url refused", dotlab.ErrorDetail(err))
	}
	if err := manifest.CheckListing(m, true); err != nil {
		t.Errorf("CheckListing with private URLs allowed: %v", err)
	}
}

// TestV01RunnerRefusesDownloads: a runner that knows only spec v0.1
// validates with the v0.1 schema (testdata/manifest.schema.v0.1.json, the
// schema as it was before v0.2, byte for byte): it accepts a v0.1
// manifest and refuses one with downloads, at spec_version and at
// downloads, instead of running it without them.
func TestV01RunnerRefusesDownloads(t *testing.T) {
	raw, err := os.ReadFile("testdata/manifest.schema.v0.1.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("v0.1.json", doc); err != nil {
		t.Fatal(err)
	}
	v01, err := c.Compile("v0.1.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(text string) error {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return v01.Validate(inst)
	}
	if err := check(valid(t)); err != nil {
		t.Fatalf("the v0.1 schema refuses a v0.1 manifest: %v", err)
	}
	v02 := withDownloads(t, download("helpers", "https://example.org/R/helpers.R"))
	if _, err := manifest.Parse([]byte(v02)); err != nil {
		t.Fatalf("this build refuses the v0.2 manifest: %v", err)
	}
	err = check(v02)
	if err == nil {
		t.Fatal("the v0.1 schema accepts a manifest with downloads")
	}
	for _, want := range []string{"/spec_version", "downloads"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("v0.1 refusal %q does not name %s", err, want)
		}
	}
}
