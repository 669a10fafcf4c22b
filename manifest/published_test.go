package manifest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// The fields of docs/manifest-spec.md for packages as published: target sources, helpers, scratch, archives with
// strip_top_folder and empty datasets.

const (
	firstTarget = `{"name": "t_paired", "value": 4.062, "tolerance": {"type": "absolute", "value": 0.0005}}`
	helper      = `"helpers": [{"name": "adapter", "url": "https://example.org/adapter.R", "sha256": "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445", "path": "R/adapter.R"}],`
)

// withSource gives the first target the source src (a JSON object text).
func withSource(t *testing.T, src string) string {
	t.Helper()
	return strings.Replace(valid(t), firstTarget, strings.TrimSuffix(firstTarget, "}")+`, "source": `+src+`}`, 1)
}

// noDatasets is the valid manifest with "datasets": [] (data pinned inside the code).
func noDatasets(t *testing.T) string {
	t.Helper()
	v := valid(t)
	i := strings.Index(v, `"datasets": [`)
	j := strings.Index(v, `"code":`)
	return v[:i] + `"datasets": [],
  ` + v[j:]
}

func TestPublishedFieldsValid(t *testing.T) {
	for _, text := range []string{
		withSource(t, `{"stream": "stdout", "regex": "t\\s*=\\s*([-0-9.]+)"}`),
		withSource(t, `{"file": "/work/out/est.json", "json": "$.coef[\"(Intercept)\"][0]"}`),
		withSource(t, `{"file": "/work/out/t2.csv", "csv": {"column": "estimate", "row": {"term": "did"}, "delimiter": ";"}}`),
		strings.Replace(withSource(t, `{"file": "/work/scratch/out/t2.csv", "regex": "(\\d+)"}`), `"seed": 1908,`, `"seed": 1908, "scratch": true,`, 1),
		strings.Replace(valid(t), `"code":`, helper+` "code":`, 1),
		noDatasets(t),
	} {
		m, err := manifest.Parse([]byte(text))
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		if err := manifest.CheckListing(m, false); err != nil {
			t.Fatalf("listing: %v", err)
		}
	}
	archive := strings.Replace(valid(t), `"code": {"repository": "https://example.org/lab/sleep-analysis.git", "commit": "0123456789abcdef0123456789abcdef01234567"}`,
		`"code": {"archive": {"url": "https://zenodo.org/r/x.tar.gz", "sha256": "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445", "strip_top_folder": false}}`, 1)
	m, err := manifest.Parse([]byte(archive))
	if err != nil || m.Code.Archive.StripTop() {
		t.Fatalf("archive: %v %+v", err, m)
	}
}

func TestPublishedFieldProblems(t *testing.T) {
	dup := strings.Replace(helper, `}],`, `}, {"name": "adapter", "url": "https://example.org/b.R", "sha256": "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445", "path": "R"}],`, 1)
	for _, c := range []struct{ text, path string }{
		{withSource(t, `{"stream": "stdout"}`), "$.targets[0].source"},
		{withSource(t, `{"stream": "stdout", "regex": "(x)", "json": "$.a"}`), "$.targets[0].source"},
		{withSource(t, `{"stream": "stdout", "file": "/work/out/a", "regex": "(x)"}`), "$.targets[0].source"},
		{withSource(t, `{"stream": "stdin", "regex": "(x)"}`), "$.targets[0].source.stream"},
		{withSource(t, `{"stream": "stdout", "regex": "x"}`), "$.targets[0].source.regex"},
		{withSource(t, `{"stream": "stdout", "regex": "(x"}`), "$.targets[0].source.regex"},
		{withSource(t, `{"stream": "stdout", "regex": "(?<=x)(y)"}`), "$.targets[0].source.regex"},
		{withSource(t, `{"stream": "stdout", "json": "$.a[01]"}`), "$.targets[0].source.json"},
		{withSource(t, `{"stream": "stdout", "json": "$..a"}`), "$.targets[0].source.json"},
		{withSource(t, `{"file": "/work/code/t.csv", "regex": "(x)"}`), "$.targets[0].source.file"},
		{withSource(t, `{"file": "/work/out/../etc/passwd", "regex": "(x)"}`), "$.targets[0].source.file"},
		{withSource(t, `{"file": "/work/out/", "regex": "(x)"}`), "$.targets[0].source.file"},
		{withSource(t, `{"file": "/work/scratch/t.csv", "regex": "(x)"}`), "$.targets[0].source.file"},
		{withSource(t, `{"file": "/work/out/t.csv", "csv": {"column": "", "row": {"term": "did"}}}`), "$.targets[0].source.csv.column"},
		{withSource(t, `{"file": "/work/out/t.csv", "csv": {"column": "e", "row": {"a": "1", "b": "2"}}}`), "$.targets[0].source.csv.row"},
		{withSource(t, `{"file": "/work/out/t.csv", "csv": {"column": "e", "row": {}}}`), "$.targets[0].source.csv.row"},
		{strings.Replace(valid(t), `"code":`, dup+` "code":`, 1), "$.helpers[1].name"},
		{strings.Replace(valid(t), `"code":`, strings.Replace(helper, "R/adapter.R", "../x", 1)+` "code":`, 1), "$.helpers[0].path"},
		{strings.Replace(valid(t), `"code":`, strings.Replace(helper, "https://example.org", "https://exa\u0001mple.org", 1)+` "code":`, 1), "$.helpers[0].url"},
	} {
		_, err := manifest.Parse([]byte(c.text))
		found := false
		for _, d := range dotlab.ErrorDetail(err) {
			found = found || strings.HasPrefix(d, c.path+":") || strings.HasPrefix(d, c.path+".")
		}
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !found {
			t.Errorf("want a problem at %s, got %v", c.path, err)
		}
	}
	// The listing rules hold helper URLs as they hold datasets.
	m, err := manifest.Parse([]byte(strings.Replace(valid(t), `"code":`, strings.Replace(helper, "https://example.org", "https://169.254.169.254", 1)+` "code":`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.CheckListing(m, true); err == nil || !strings.Contains(err.Error(), "$.helpers[0].url") {
		t.Fatalf("listing a metadata-address helper: %v", err)
	}
}

// TestFormProblems: the "exactly one form" rules of code and of a target
// source say what to give, at the field that breaks them.
func TestFormProblems(t *testing.T) {
	git := `"code": {"repository": "https://example.org/lab/sleep-analysis.git", "commit": "0123456789abcdef0123456789abcdef01234567"}`
	archive := `"archive": {"url": "https://zenodo.org/r/x.tar.gz", "sha256": "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"}`
	code := "give exactly one form: repository and commit (git code), or archive"
	source := "give exactly one place (stream or file) and one extractor (json, csv or regex)"
	for _, c := range []struct{ text, want string }{
		{strings.Replace(valid(t), git, strings.TrimSuffix(git, "}")+", "+archive+"}", 1), "$.code.repository: " + code},
		{strings.Replace(valid(t), git, `"code": {}`, 1), "$.code: " + code},
		{strings.Replace(valid(t), git, `"code": {"repository": "https://example.org/x.git"}`, 1), "$.code: properties 'commit' required, if 'repository' exists"},
		{withSource(t, `{"stream": "stdout"}`), "$.targets[0].source: " + source},
		{withSource(t, `{"stream": "stdout", "file": "/work/out/a", "regex": "(x)"}`), "$.targets[0].source.file: " + source},
		{withSource(t, `{"file": "/work/out/a", "json": "$.a", "csv": {"column": "e", "row": {"a": "1"}}}`), "$.targets[0].source.csv: " + source},
	} {
		_, err := manifest.Parse([]byte(c.text))
		if d := dotlab.ErrorDetail(err); !slices.Contains(d, c.want) {
			t.Errorf("want %q, got %q", c.want, d)
		}
	}
}
