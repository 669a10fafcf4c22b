package runner_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// coverage is the server's judgement (dotlab.CheckLogCoverage) of the
// logs.jsonl a rerun wrote into out, against the run it recorded.
func coverage(t *testing.T, m *dotlab.Manifest, rec *runner.Record, out string) (*dotlab.LogCoverage, []byte) {
	t.Helper()
	logs, err := os.ReadFile(filepath.Join(out, runner.LogsFile))
	if err != nil {
		t.Fatal(err)
	}
	return dotlab.CheckLogCoverage(m, &rec.Body, logs), logs
}

func wantComplete(t *testing.T, m *dotlab.Manifest, rec *runner.Record, out string, required int) {
	t.Helper()
	cov, _ := coverage(t, m, rec, out)
	if !cov.Complete || cov.Required != required || cov.Covered != required {
		t.Fatalf("%s run: log coverage %d of %d (want %d), missing %q", rec.Body.Outcome, cov.Covered, cov.Required, required, cov.Missing)
	}
}

// TestLogsCoverEveryItem: the logs.jsonl of a real rerun (runner.Rerun in
// runc) covers every item the server requires of its run, for each outcome
// (docs/protocol.md §6 "Log coverage"), so our runners' runs count as well
// logged; the same log without its compare lines is judged incomplete,
// naming each missing comparison.
func TestLogsCoverEveryItem(t *testing.T) {
	f := newFixture(t)
	url := f.fileURL()

	m := f.manifest(url, meanScript)
	rec, out := f.mustRerun(m, dotlab.OutcomeReproduced)
	// environment, input data, command, outputs results.json, stream:stdout
	// and stream:stderr, comparisons mean and n, outcome
	wantComplete(t, m, rec, out, 9)
	_, logs := coverage(t, m, rec, out)
	var kept []byte
	for _, line := range bytes.SplitAfter(logs, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"step":"compare"`)) {
			kept = append(kept, line...)
		}
	}
	cov := dotlab.CheckLogCoverage(m, &rec.Body, kept)
	if cov.Complete || cov.Covered != 7 || len(cov.Missing) != 2 ||
		!strings.HasPrefix(cov.Missing[0], `comparison mean: a "compare" line with data.name "mean" and data.rerun 2.5`) ||
		!strings.HasPrefix(cov.Missing[1], `comparison n: a "compare" line with data.name "n" and data.rerun 4`) {
		t.Fatalf("log without comparisons: %+v", cov)
	}
	// A run that reports another value than its log is not covered there.
	rec.Body.Comparisons[0].Rerun = "2.6"
	if cov, _ := coverage(t, m, rec, out); cov.Complete || cov.Missing[0] != `comparison mean: a "compare" line with data.name "mean" and data.rerun 2.6 (the run's value, as a JSON number)` {
		t.Fatalf("misreported value: %+v", cov)
	}

	m = f.manifest(url, `echo '{"mean": 2.6, "n": 4}' > "$DOTLAB_OUT_DIR/results.json"`)
	rec, out = f.mustRerun(m, dotlab.OutcomeNotReproduced)
	wantComplete(t, m, rec, out, 9)

	m = f.manifest(url, `echo partial > "$DOTLAB_OUT_DIR/part.txt"; exit 3`)
	rec, out = f.mustRerun(m, dotlab.OutcomeSpecIssue, "exited with status 3")
	wantComplete(t, m, rec, out, 7) // environment, input, command, outputs part.txt and the two streams, outcome

	m = f.manifest(url, meanScript)
	m.Datasets[0].SHA256 = strings.Repeat("0", 64)
	rec, out = f.mustRerun(m, dotlab.OutcomeInputMismatch)
	wantComplete(t, m, rec, out, 2) // input data (its actual hash), outcome

	helper := []byte("true\n")
	p := filepath.Join(t.TempDir(), "lib.sh")
	os.WriteFile(p, helper, 0o644)
	sum := sha256.Sum256(helper)
	m = f.manifest(url, ". /work/helpers/lib.sh; "+meanScript)
	m.Helpers = []dotlab.Helper{{Name: "lib", URL: "file://" + p, SHA256: hex.EncodeToString(sum[:]), Path: "lib.sh"}}
	rec, out = f.mustRerun(m, dotlab.OutcomeReproduced)
	wantComplete(t, m, rec, out, 10) // … and input helper:lib
	m.Helpers[0].SHA256 = strings.Repeat("1", 64)
	rec, out = f.mustRerun(m, dotlab.OutcomeSpecIssue, "helper lib")
	wantComplete(t, m, rec, out, 3) // inputs data and helper:lib, outcome
}
