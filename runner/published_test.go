package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// Tests for packages rerun as published (issue #12): target sources, helper
// files, the scratch copy, archives with a top folder, no datasets, and
// failure notes. Every test runs real runc containers on the busybox fixture.

func target(name, value string, src *dotlab.TargetSource) dotlab.Target {
	return dotlab.Target{Name: name, Value: dotlab.Decimal(value), Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0"}, Source: src}
}

// published is a manifest for script with the given targets and no datasets.
func (f *fixture) published(script string, targets ...dotlab.Target) *dotlab.Manifest {
	m := f.manifest("", script)
	m.Datasets = nil
	m.Targets = targets
	return m
}

func checkServer(t *testing.T, m *dotlab.Manifest, rec *runner.Record) {
	t.Helper()
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("server would reject run.json: %v\n%s", err, runner.MarshalBody(rec.Body))
	}
}

// TestTargetSourcesEveryExtractor: a stdout regex, a stderr regex, a JSON
// path into a file of /work/out and a CSV cell, with no results.json and no
// dataset; each number is kept as its decimal text ("2.760" stays "2.760").
func TestTargetSourcesEveryExtractor(t *testing.T) {
	f := newFixture(t)
	script := `echo "did      2.760   (0.41)"
echo "se  0.410" >&2
printf '{"coef": {"did": 1.50}, "rows": [0, {"(Intercept)": -3.25e-2}]}' > "$DOTLAB_OUT_DIR/est.json"
printf '"","term","estimate"\n"1","(Intercept)",10.0\n"2","did",2.7600\n' > "$DOTLAB_OUT_DIR/table2.csv"
`
	m := f.published(script,
		target("did_stdout", "2.76", &dotlab.TargetSource{Stream: "stdout", Regex: `did\s+([-0-9.eE+]+)`}),
		target("se_stderr", "0.41", &dotlab.TargetSource{Stream: "stderr", Regex: `(?m)^se\s+(\S+)$`}),
		target("did_json", "1.5", &dotlab.TargetSource{File: "/work/out/est.json", JSON: "$.coef.did"}),
		target("icpt_json", "-0.0325", &dotlab.TargetSource{File: "/work/out/est.json", JSON: `$.rows[1]["(Intercept)"]`}),
		target("did_csv", "2.76", &dotlab.TargetSource{File: "/work/out/table2.csv", CSV: &dotlab.CSVCell{Column: "estimate", Row: map[string]string{"term": "did"}}}),
	)
	rec, _ := f.mustRerun(m, dotlab.OutcomeReproduced)
	want := map[string]string{"did_stdout": "2.760", "se_stderr": "0.410", "did_json": "1.50", "icpt_json": "-3.25e-2", "did_csv": "2.7600"}
	for _, c := range rec.Body.Comparisons {
		if string(c.Rerun) != want[c.Name] {
			t.Errorf("%s: rerun %q, want the text %q", c.Name, c.Rerun, want[c.Name])
		}
	}
	if len(rec.Body.InputHashes) != 0 || rec.Body.Environment.CodeCommit != m.Code.Commit {
		t.Errorf("input hashes %v, code commit %q", rec.Body.InputHashes, rec.Body.Environment.CodeCommit)
	}
	checkServer(t, m, rec)
}

// TestResultsJSONWinsOverSource: a target with a source takes results.json's
// value when results.json has its key; a target results.json leaves out
// takes its source.
func TestResultsJSONWinsOverSource(t *testing.T) {
	f := newFixture(t)
	m := f.published(`echo "a 9"; echo "b 2"; echo '{"a": 1}' > "$DOTLAB_OUT_DIR/results.json"`,
		target("a", "1", &dotlab.TargetSource{Stream: "stdout", Regex: `a (\d+)`}),
		target("b", "2", &dotlab.TargetSource{Stream: "stdout", Regex: `b (\d+)`}),
	)
	rec, _ := f.mustRerun(m, dotlab.OutcomeReproduced)
	if rec.Body.Comparisons[0].Rerun != "1" || rec.Body.Comparisons[1].Rerun != "2" {
		t.Fatalf("comparisons %+v", rec.Body.Comparisons)
	}
	// The record says where each value came from.
	if rec.ReadFrom["a"] != "/work/out/results.json" || rec.ReadFrom["b"] != `stdout, regex "b (\\d+)"` {
		t.Fatalf("read from %q", rec.ReadFrom)
	}
	checkServer(t, m, rec)
}

// TestTargetSourceProblems: a source that gives no number is spec_issue
// naming the target and the rule.
func TestTargetSourceProblems(t *testing.T) {
	f := newFixture(t)
	csv := &dotlab.CSVCell{Column: "estimate", Row: map[string]string{"term": "did"}}
	cases := []struct {
		name, script string
		src          dotlab.TargetSource
		note         []string
	}{
		{"no match", `echo "nothing here"`, dotlab.TargetSource{Stream: "stdout", Regex: `did\s+(\S+)`},
			[]string{"target x: source stdout, regex", "no match"}},
		{"leading plus", `echo "did +2.76"`, dotlab.TargetSource{Stream: "stdout", Regex: `did\s+(\S+)`},
			[]string{"target x", "not a number", "+2.76"}},
		{"NA cell", `printf 'term,estimate\ndid,NA\n' > $DOTLAB_OUT_DIR/t.csv`, dotlab.TargetSource{File: "/work/out/t.csv", CSV: csv},
			[]string{"target x: source /work/out/t.csv, csv column \"estimate\"", "not a number"}},
		{"two rows", `printf 'term,estimate\ndid,1\ndid,2\n' > $DOTLAB_OUT_DIR/t.csv`, dotlab.TargetSource{File: "/work/out/t.csv", CSV: csv},
			[]string{"2 rows where \"term\" = \"did\""}},
		{"missing file", `true`, dotlab.TargetSource{File: "/work/out/t.csv", CSV: csv},
			[]string{"target x: source /work/out/t.csv", "does not exist"}},
		{"json not a number", `echo '{"did": "2.76"}' > $DOTLAB_OUT_DIR/e.json`, dotlab.TargetSource{File: "/work/out/e.json", JSON: "$.did"},
			[]string{"target x", `$["did"] is a string, not a number`}},
		{"json index into an object", `echo '{"0": 2.76}' > $DOTLAB_OUT_DIR/e.json`, dotlab.TargetSource{File: "/work/out/e.json", JSON: "$[0]"},
			[]string{"target x", `$ is an object, not an array: [0] selects an array item (a key is written ["0"])`}},
		{"json key into an array", `echo '[{"did": 2.76}]' > $DOTLAB_OUT_DIR/e.json`, dotlab.TargetSource{File: "/work/out/e.json", JSON: "$.did"},
			[]string{"target x", `$ is an array of 1 items, not an object: ["did"] selects a key (an item is written [N])`}},
		{"json index past the end", `echo '[1, 2]' > $DOTLAB_OUT_DIR/e.json`, dotlab.TargetSource{File: "/work/out/e.json", JSON: "$[2]"},
			[]string{"target x", `$ is an array of 2 items: no item [2]`}},
		{"symlinked file", `echo '{"did": 2.76}' > /tmp/e.json; ln -s /tmp/e.json $DOTLAB_OUT_DIR/e.json`, dotlab.TargetSource{File: "/work/out/e.json", JSON: "$.did"},
			[]string{"symlink in the output directory: e.json"}},
		{"oversized file", `dd if=/dev/zero of=$DOTLAB_OUT_DIR/big.txt bs=1M count=17 2>/dev/null`, dotlab.TargetSource{File: "/work/out/big.txt", Regex: `(\d+)`},
			[]string{"target x: source /work/out/big.txt", "over the 16777216-byte bound"}},
		{"stream over the bound", `head -c 17000000 /dev/zero`, dotlab.TargetSource{Stream: "stdout", Regex: `(\d+)`},
			[]string{"stdout is longer than 16777216 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := f.published(c.script, target("x", "2.76", &c.src))
			rec, _ := f.mustRerun(m, dotlab.OutcomeSpecIssue, c.note...)
			checkServer(t, m, rec)
		})
	}
}

// TestScratchCopy: with scratch, the package runs in a writable copy at
// /work/scratch (its default working directory) and writes next to its
// code; /work/code stays read-only and unchanged; a target reads a file the
// run wrote there; TMPDIR and LANG are set. A file the package ships and
// the run did not write, and a symlink, are not read.
func TestScratchCopy(t *testing.T) {
	f := newFixture(t)
	script := `set -e
pwd > pwd.txt
echo "fig" > figure.eps
mkdir -p tables && printf 'term,estimate\ndid,2.760\n' > tables/t2.csv
if touch /work/code/x 2>/dev/null; then echo "code is writable" >&2; exit 9; fi
echo "$TMPDIR $LANG $(cat pwd.txt)" > "$DOTLAB_OUT_DIR/env.txt"
ln -s tables/t2.csv link.csv
`
	csv := &dotlab.CSVCell{Column: "estimate", Row: map[string]string{"term": "did"}}
	m := f.published(script, target("did", "2.76", &dotlab.TargetSource{File: "/work/scratch/tables/t2.csv", CSV: csv}))
	m.Scratch = true
	rec, out := f.mustRerun(m, dotlab.OutcomeReproduced)
	if rec.Body.Comparisons[0].Rerun != "2.760" {
		t.Fatalf("rerun %q", rec.Body.Comparisons[0].Rerun)
	}
	env, _ := os.ReadFile(filepath.Join(out, runner.OutSub, "env.txt"))
	if strings.TrimSpace(string(env)) != "/tmp C.UTF-8 /work/scratch" {
		t.Fatalf("TMPDIR LANG pwd: %q", env)
	}
	if _, err := os.Stat(filepath.Join(out, runner.OutSub, "figure.eps")); err == nil {
		t.Fatalf("the scratch copy was copied out")
	}
	// The file the source read is recorded among the outputs by its hash;
	// scratch files no source read are not.
	sum := sha256.Sum256([]byte("term,estimate\ndid,2.760\n"))
	if got := rec.Body.OutputHashes["/work/scratch/tables/t2.csv"]; got != hex.EncodeToString(sum[:]) {
		t.Fatalf("output_hashes[/work/scratch/tables/t2.csv] = %q, want %x (all: %v)", got, sum, rec.Body.OutputHashes)
	}
	if _, ok := rec.Body.OutputHashes["/work/scratch/figure.eps"]; ok {
		t.Fatalf("a scratch file no source read is among the outputs: %v", rec.Body.OutputHashes)
	}
	checkServer(t, m, rec)

	t.Run("shipped file not rewritten", func(t *testing.T) {
		m := f.published(`true`, target("did", "2.76", &dotlab.TargetSource{File: "/work/scratch/run.sh", Regex: `(\d)`}))
		m.Scratch = true
		f.mustRerun(m, dotlab.OutcomeSpecIssue, "target did: source /work/scratch/run.sh", "was not written by the run")
	})
	t.Run("symlink", func(t *testing.T) {
		m := f.published(script, target("did", "2.76", &dotlab.TargetSource{File: "/work/scratch/link.csv", CSV: csv}))
		m.Scratch = true
		f.mustRerun(m, dotlab.OutcomeSpecIssue, "target did: source /work/scratch/link.csv", "symbolic link (not followed)")
	})
	// A shipped file (or its directory) the run deleted is said to be
	// deleted, not to be "a device" (the overlay's whiteout).
	t.Run("deleted by the run", func(t *testing.T) {
		dir, commit := repo(t, map[string]string{"run.sh": `rm -f run.sh; rm -rf tables; echo ok`, "tables/t2.csv": "term,estimate\ndid,2.760\n"})
		for _, c := range []struct{ file, says string }{
			{"/work/scratch/run.sh", "was deleted by the run"},
			{"/work/scratch/tables/t2.csv", "was deleted by the run (its directory tables was removed)"},
		} {
			m := f.published("", target("did", "2.76", &dotlab.TargetSource{File: c.file, Regex: `(\d)`}))
			m.Code = dotlab.Code{Repository: dir, Commit: commit}
			m.Scratch = true
			f.mustRerun(m, dotlab.OutcomeSpecIssue, "target did: source "+c.file+", regex", c.says)
		}
	})
	t.Run("without scratch the code is read-only", func(t *testing.T) {
		m := f.published(`echo x > figure.eps`, target("did", "1", &dotlab.TargetSource{Stream: "stdout", Regex: `(\d)`}))
		f.mustRerun(m, dotlab.OutcomeSpecIssue, "exited with status", "Read-only file system", `needs "scratch": true`)
	})
}

// tgz writes a tar.gz of files (name → content; a name ending in / is a
// directory) and returns its path and SHA-256.
func tgz(t *testing.T, files ...[2]string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, fl := range files {
		h := &tar.Header{Name: fl[0], Mode: 0o644, Size: int64(len(fl[1])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(fl[0], "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(fl[1]))
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "code.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return p, hex.EncodeToString(sum[:])
}

// TestArchiveTopFolder: a single top-level folder (GitHub's repo-<sha>/)
// is stripped by default and kept with strip_top_folder false; an archive
// without one is unpacked as it is. run.json records the archive's hash.
func TestArchiveTopFolder(t *testing.T) {
	f := newFixture(t)
	script := `echo "v 7"`
	no := false
	cases := []struct {
		name  string
		files [][2]string
		strip *bool
		entry []string
	}{
		{"top folder stripped", [][2]string{{"repo-abc123/", ""}, {"repo-abc123/run.sh", script}}, nil, []string{"sh", "run.sh"}},
		{"top folder kept", [][2]string{{"repo-abc123/", ""}, {"repo-abc123/run.sh", script}}, &no, []string{"sh", "repo-abc123/run.sh"}},
		{"no top folder", [][2]string{{"run.sh", script}, {"README", "x"}}, nil, []string{"sh", "run.sh"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, sum := tgz(t, c.files...)
			m := f.published("", target("v", "7", &dotlab.TargetSource{Stream: "stdout", Regex: `v (\d+)`}))
			m.Code = dotlab.Code{Archive: &dotlab.Archive{URL: "file://" + p, SHA256: sum, StripTopFolder: c.strip}}
			m.Entrypoint = c.entry
			rec, _ := f.mustRerun(m, dotlab.OutcomeReproduced)
			if rec.Body.Environment.CodeArchiveSHA256 != sum || rec.Body.Environment.CodeCommit != "" {
				t.Fatalf("environment %+v", rec.Body.Environment)
			}
			checkServer(t, m, rec)
		})
	}
}

// TestHelperFile: a helper is fetched and verified like a dataset, mounted
// read-only at /work/helpers/<path>, and its hash recorded as
// "helper:<name>"; a helper whose bytes differ is spec_issue.
func TestHelperFile(t *testing.T) {
	f := newFixture(t)
	body := []byte("est() { echo \"did 2.760\"; }\n")
	p := filepath.Join(t.TempDir(), "adapter.sh")
	os.WriteFile(p, body, 0o644)
	sum := sha256.Sum256(body)
	script := `. /work/helpers/lib/adapter.sh; est
if echo x > /work/helpers/lib/adapter.sh 2>/dev/null; then exit 9; fi
if touch /work/helpers/new 2>/dev/null; then exit 8; fi`
	m := f.manifest(f.fileURL(), script)
	m.Helpers = []dotlab.Helper{{Name: "adapter", URL: "file://" + p, SHA256: hex.EncodeToString(sum[:]), Path: "lib/adapter.sh"}}
	m.Targets = []dotlab.Target{target("did", "2.76", &dotlab.TargetSource{Stream: "stdout", Regex: `did (\S+)`})}
	rec, _ := f.mustRerun(m, dotlab.OutcomeReproduced)
	if rec.Body.InputHashes["helper:adapter"] != hex.EncodeToString(sum[:]) || rec.Body.InputHashes["data"] != f.dataSH {
		t.Fatalf("input hashes %v", rec.Body.InputHashes)
	}
	checkServer(t, m, rec)
	// The server requires the helper's hash of a compared run.
	delete(rec.Body.InputHashes, "helper:adapter")
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err == nil || !strings.Contains(err.Error(), "missing helper") {
		t.Fatalf("a run without the helper's hash passed: %v", err)
	}

	m.Helpers[0].SHA256 = strings.Repeat("0", 64)
	rec, out := f.mustRerun(m, dotlab.OutcomeSpecIssue, "helper adapter: expected sha256 "+strings.Repeat("0", 64), hex.EncodeToString(sum[:]))
	if n := steps(readLogs(t, out)); n["execute"] != 0 {
		t.Fatalf("executed after a helper mismatch")
	}
	checkServer(t, m, rec)
}

// TestFailureNoteQuotesTheError: the note of a failed run quotes the last
// meaningful stderr lines, not R's "Execution halted" alone.
func TestFailureNoteQuotesTheError(t *testing.T) {
	f := newFixture(t)
	script := `echo "Loading required package: metafor" >&2
echo "Error in rma(yi, vi, data = dat) : object 'yi' not found" >&2
echo "Calls: source -> withVisible -> eval -> eval -> rma" >&2
echo "Execution halted" >&2
exit 1`
	m := f.published(script, target("x", "1", nil))
	rec, _ := f.mustRerun(m, dotlab.OutcomeSpecIssue, "exited with status 1",
		"Error in rma(yi, vi, data = dat) : object 'yi' not found | Calls: source -> withVisible -> eval -> eval -> rma")
	if strings.Contains(rec.Body.Notes, "Execution halted") {
		t.Errorf("the trailer is quoted: %s", rec.Body.Notes)
	}
	checkServer(t, m, rec)
}

// TestRunJSONRecordsCode: run.json carries the commit beside the image digest.
func TestRunJSONRecordsCode(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), meanScript)
	_, out := f.mustRerun(m, dotlab.OutcomeReproduced)
	data, _ := os.ReadFile(filepath.Join(out, runner.RunFile))
	var body struct {
		Environment map[string]any `json:"environment"`
	}
	json.Unmarshal(data, &body)
	if body.Environment["code_commit"] != m.Code.Commit || body.Environment["image_digest"] != m.Environment.ImageDigest() {
		t.Fatalf("run.json environment: %s", data)
	}
}
