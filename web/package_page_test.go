package web_test

import (
	"context"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/manifest"
)

// packageManifest is a replication package as published: no datasets (the
// data is in the code), a pinned helper file, scratch, and targets read
// from the package's own outputs.
const packageManifest = `{
  "spec_version": "0.1",
  "title": "A package as published",
  "source": {"citation": "Viechtbauer, W. (2010). Journal of Statistical Software 36(3).", "doi": "10.18637/jss.v036.i03"},
  "datasets": [],
  "helpers": [{"name": "adapter", "url": "https://code.example.org/adapter.R", "sha256": "1111111111111111111111111111111111111111111111111111111111111111", "path": "adapter.R"}],
  "code": {"repository": "https://code.example.org/bcg.git", "commit": "0123456789abcdef0123456789abcdef01234567"},
  "environment": {"image": "registry.example.org/r@sha256:2222222222222222222222222222222222222222222222222222222222222222"},
  "entrypoint": ["Rscript", "analysis.R"],
  "scratch": true,
  "targets": [
    {"name": "estimate", "value": -0.7145, "tolerance": {"type": "absolute", "value": 0.00005},
     "source": {"stream": "stdout", "regex": "estimate: (\\S+)"}},
    {"name": "se", "value": 0.1798, "tolerance": {"type": "absolute", "value": 0.00005},
     "source": {"file": "/work/scratch/tables/re.csv", "csv": {"column": "se", "row": {"term": "estimate"}}}},
    {"name": "tau2", "value": 0.3132, "tolerance": {"type": "absolute", "value": 0.00005}}
  ]
}`

// TestClaimPageShowsAPackageAsPublished: the claim page says there are no
// datasets (and why), lists the helper file as a helper with where it is
// mounted, says where each target's number is read, and that the run uses
// a scratch copy.
func TestClaimPageShowsAPackageAsPublished(t *testing.T) {
	s := newSite(t)
	m, err := manifest.Parse([]byte(packageManifest))
	if err != nil {
		t.Fatal(err)
	}
	h, err := manifest.Hash([]byte(packageManifest))
	if err != nil {
		t.Fatal(err)
	}
	c := must(sqlstoretest.Protocol(s.db).CreateClaim(context.Background(), s.ids["submitter"], dotlab.NewClaim{Raw: []byte(packageManifest), Manifest: m, ManifestHash: h, Field: "psychology"}))
	code, _, body := s.get("/claims/"+c.ID, "text/html")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	contains(t, "claim page", html.UnescapeString(body),
		"None: the data is inside the code",
		"<h3>Helper files</h3>", "adapter", "/work/helpers/adapter.R", "1111111111111111111111111111111111111111111111111111111111111111",
		"Where each number is read", `<code>stdout</code>, regex "estimate: (\\S+)"`,
		`<code>/work/scratch/tables/re.csv</code>, csv column "se" where "term" = "estimate"`, "<code>tau2</code>: <code>/work/out/results.json</code>",
		"writable copy of the code at <code>/work/scratch</code>")
	// The helper is not shown as a dataset.
	datasets := body[strings.Index(body, "<h3>Datasets</h3>"):strings.Index(body, "<h3>Helper files</h3>")]
	if strings.Contains(datasets, "adapter") {
		t.Errorf("the helper is listed among the datasets: %s", datasets)
	}
}

// TestClaimPageListsDownloads: a spec v0.2 claim's pinned downloads are
// listed (name, URL, SHA-256) and the "no datasets" line says the data may
// come from them rather than only from the code or the image.
func TestClaimPageListsDownloads(t *testing.T) {
	s := newSite(t)
	raw := strings.Replace(strings.Replace(packageManifest, `"spec_version": "0.1"`, `"spec_version": "0.2"`, 1),
		`"code": {`, `"downloads": [{"name": "bcg.csv", "url": "https://data.example.org/bcg.csv?v=2", "sha256": "`+strings.Repeat("3", 64)+`"}], "code": {`, 1)
	m, err := manifest.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	h, err := manifest.Hash([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := must(sqlstoretest.Protocol(s.db).CreateClaim(context.Background(), s.ids["submitter"], dotlab.NewClaim{Raw: []byte(raw), Manifest: m, ManifestHash: h, Field: "psychology"}))
	code, _, body := s.get("/claims/"+c.ID, "text/html")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	body = html.UnescapeString(body)
	contains(t, "claim page", body,
		"None: the data is fetched by the code from the pinned downloads below",
		"<h3>Downloads</h3>", "<th scope=\"row\">bcg.csv</th>", "https://data.example.org/bcg.csv?v=2", strings.Repeat("3", 64))
}
