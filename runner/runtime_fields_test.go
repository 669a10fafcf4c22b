package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/manifest"
)

// platformOnly is a package whose first line calls what only another
// platform has (as `setwd(choose.dir())` is in an R script written on
// Windows): here a command the image does not have, so the script stops
// with status 127 before it computes anything.
const platformOnly = "set -e\nchoose_dir_windows_only\n" + meanScript + "\n"

const choosePatch = "--- a/run.sh\n+++ b/run.sh\n@@ -1,3 +1,3 @@\n set -e\n-choose_dir_windows_only\n+cd \"$DOTLAB_DATA_DIR\"\n " + meanScript + "\n"

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// v02 makes m a spec v0.2 manifest and checks it as the server would.
func v02(t *testing.T, m *dotlab.Manifest) *dotlab.Manifest {
	t.Helper()
	m.SpecVersion = dotlab.SpecVersionRuntime
	if err := manifest.Check(m); err != nil {
		t.Fatalf("manifest: %v", dotlab.ErrorDetail(err))
	}
	return m
}

func TestDeclaredPatchIsAppliedBeforeTheRun(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), platformOnly)
	// As published, the package cannot run.
	f.mustRerun(m, dotlab.OutcomeSpecIssue, "exited with status 127")

	m.Code.Patches = []dotlab.Patch{{Reason: "choose_dir_windows_only is an interactive folder picker that only Windows has", Diff: choosePatch}}
	rec, out := f.mustRerun(v02(t, m), dotlab.OutcomeReproduced)
	patched := strings.Replace(platformOnly, "choose_dir_windows_only", `cd "$DOTLAB_DATA_DIR"`, 1)
	want := sum("file " + sum(patched) + " 6 run.sh\n")
	if got := rec.Body.Environment.CodeTreeSHA256; got != want {
		t.Fatalf("code_tree_sha256 = %s, want %s (the patched tree)", got, want)
	}
	if rec.Body.Environment.CodeCommit != m.Code.Commit {
		t.Fatalf("code_commit = %q", rec.Body.Environment.CodeCommit)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("the server refuses the run: %v", err)
	}
	found := false
	for _, e := range readLogs(t, out) {
		if e.Step == "code" && e.Msg == "code.patches[0] applied" && e.Data["added"] == float64(1) && e.Data["removed"] == float64(1) {
			found = true
		}
	}
	if !found {
		t.Fatal("no log line for the applied patch")
	}

	// A patch that does not apply (the line it removes is not there) is
	// spec_issue naming it; nothing runs.
	m.Code.Patches[0].Diff = strings.Replace(choosePatch, "-choose_dir_windows_only", "-choose_dir", 1)
	rec, _ = f.mustRerun(m, dotlab.OutcomeSpecIssue, "code.patches[0]", "does not apply", "run.sh", "hunk 1")
	if rec.Body.Environment.Runtime != nil || len(rec.Body.OutputHashes) != 0 {
		t.Fatalf("the analysis ran: %+v", rec.Body)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("the server refuses the spec_issue: %v", err)
	}
}

func TestPatchCannotLeaveTheTree(t *testing.T) {
	f := newFixture(t)
	dir, commit := repo(t, map[string]string{"run.sh": meanScript + "\n", "lib": "x\n"})
	m := f.manifest(f.fileURL(), meanScript)
	m.Code.Repository, m.Code.Commit = dir, commit
	// lib is a regular file; a patch that goes through it as a directory, or
	// that creates a file that exists, is refused at run time.
	for diff, note := range map[string]string{
		"--- /dev/null\n+++ b/lib\n@@ -0,0 +1 @@\n+y\n":             "already has it",
		"--- /dev/null\n+++ b/lib/x.sh\n@@ -0,0 +1 @@\n+y\n":        "lib",
		"--- a/missing.sh\n+++ b/missing.sh\n@@ -1 +1 @@\n-a\n+b\n": "does not exist",
	} {
		m.Code.Patches = []dotlab.Patch{{Reason: "test", Diff: diff}}
		f.mustRerun(v02(t, m), dotlab.OutcomeSpecIssue, "code.patches[0]", note)
	}
}

func TestEnvironmentEnvReachesTheAnalysis(t *testing.T) {
	f := newFixture(t)
	script := `printf '{"mean": 2.5, "n": %s}\n' "$OMP_NUM_THREADS" > "$DOTLAB_OUT_DIR/results.json"; echo "TZ=$TZ"`
	m := f.manifest(f.fileURL(), script)
	m.Environment.Env = map[string]string{"OMP_NUM_THREADS": "4", "TZ": "UTC"}
	_, out := f.mustRerun(v02(t, m), dotlab.OutcomeReproduced)
	found := false
	for _, e := range readLogs(t, out) {
		if s, _ := e.Data["stdout"].(string); e.Step == "execute" && strings.Contains(s, "TZ=UTC") {
			found = true
		}
	}
	if !found {
		t.Fatal("TZ did not reach the analysis")
	}
	// A zone the image (busybox, no tzdata) does not hold: spec_issue
	// naming environment.env.TZ, before anything runs.
	m.Environment.Env = map[string]string{"TZ": "Europe/Berlin"}
	rec, _ := f.mustRerun(v02(t, m), dotlab.OutcomeSpecIssue, "environment.env.TZ", "/usr/share/zoneinfo/Europe/Berlin")
	if rec.Body.Environment.Runtime != nil {
		t.Fatal("the analysis ran with a zone the image lacks")
	}
}

func TestPrintedValuesOfAFailedRunAreKept(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), `echo "mean = 2.5"; echo "n = 4"; echo "about to crash" >&2; exit 1`)
	for i := range m.Targets {
		m.Targets[i].Source = &dotlab.TargetSource{Stream: "stdout", Regex: `(?m)^` + m.Targets[i].Name + ` = ([0-9.]+)`}
	}
	rec, out := f.mustRerun(m, dotlab.OutcomeSpecIssue, "exited with status 1")
	if len(rec.Body.Comparisons) != 0 {
		t.Fatalf("comparisons of a spec_issue: %+v", rec.Body.Comparisons)
	}
	got := map[string]dotlab.Decimal{}
	for _, u := range rec.Body.Uncompared {
		got[u.Name] = u.Value
		if !strings.HasPrefix(u.Source, "stdout") {
			t.Errorf("%s read from %q", u.Name, u.Source)
		}
	}
	if got["mean"] != "2.5" || got["n"] != "4" || len(got) != 2 {
		t.Fatalf("uncompared = %+v", rec.Body.Uncompared)
	}
	if h := rec.Body.OutputHashes["stream:stdout"]; h != sum("mean = 2.5\nn = 4\n") {
		t.Fatalf("stream:stdout = %q", h)
	}
	if h := rec.Body.OutputHashes["stream:stderr"]; h != sum("about to crash\n") {
		t.Fatalf("stream:stderr = %q", h)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("the server refuses the run: %v", err)
	}
	// The log covers every output key, the streams included.
	logs := readLogs(t, out)
	for key := range rec.Body.OutputHashes {
		ok := false
		for _, e := range logs {
			if e.Step == "outputs" && e.Data["path"] == key {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no outputs log line for %s", key)
		}
	}
	// A compared run carries no uncompared values; the server refuses them.
	bad := rec.Body
	bad.Outcome = dotlab.OutcomeReproduced
	if _, err := dotlab.EvaluateRun(m, &bad); err == nil || !strings.Contains(strings.Join(dotlab.ErrorDetail(err), " "), "$.uncompared") {
		t.Fatalf("compared run with uncompared values: %v", err)
	}
}

func TestOutputFileCannotTakeAStreamKey(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), meanScript+`; echo forged > "$DOTLAB_OUT_DIR/stream:stdout"; echo hello`)
	rec, _ := f.mustRerun(m, dotlab.OutcomeReproduced, `"stream:stdout" is not in output_hashes`)
	if h := rec.Body.OutputHashes["stream:stdout"]; h != sum("hello\n") {
		t.Fatalf("stream:stdout = %q: the output file took the stream's key", h)
	}
}

// TestRunFromARepositoryWithMissingHistory: a bare repository whose
// history lost a blob (git clone fails) but whose pinned commit is
// complete, served by a real git daemon, is fetched and run.
func TestRunFromARepositoryWithMissingHistory(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	base := testfix.GitDaemon(t, root)
	pinned, _ := testfix.BrokenHistory(t, root, "mirror", meanScript+"\n", true, true)
	m := f.manifest(f.fileURL(), meanScript)
	m.Code.Repository, m.Code.Commit = base+"/mirror.git", pinned
	rec, _ := f.mustRerun(m, dotlab.OutcomeReproduced)
	if rec.Body.Environment.CodeCommit != pinned {
		t.Fatalf("code_commit = %q, want %s", rec.Body.Environment.CodeCommit, pinned)
	}
}

func TestPrintedValuesOfATimedOutRunAreKept(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), `echo "mean = 2.5"; echo "n = 4"; sleep 60`)
	m.Limits.TimeoutSeconds = 2
	for i := range m.Targets {
		m.Targets[i].Source = &dotlab.TargetSource{Stream: "stdout", Regex: `(?m)^` + m.Targets[i].Name + ` = ([0-9.]+)`}
	}
	rec, _ := f.mustRerun(m, dotlab.OutcomeSpecIssue, "timed out")
	if len(rec.Body.Uncompared) != 2 || rec.Body.Uncompared[0].Value != "2.5" || rec.Body.Uncompared[1].Value != "4" {
		t.Fatalf("uncompared = %+v", rec.Body.Uncompared)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("the server refuses the run: %v", err)
	}
}

// TestPrintedValuesWithALongNonASCIIRegexArePublishable: a timed-out run
// whose target regex is 1024 code points of "é" (the schema's bound) keeps
// its printed values, and the run, sent as JSON, is accepted by the
// server's EvaluateRun (the source cut on a rune boundary within
// dotlab.MaxUncomparedSource bytes).
func TestPrintedValuesWithALongNonASCIIRegexArePublishable(t *testing.T) {
	f := newFixture(t)
	e := strings.Repeat("é", 1017)
	m := f.manifest(f.fileURL(), `echo "`+e+`=2.5"; echo "`+e+`:4"; sleep 60`)
	m.Limits.TimeoutSeconds = 2
	sep := map[string]string{"mean": "=", "n": ":"}
	for i := range m.Targets {
		m.Targets[i].Source = &dotlab.TargetSource{Stream: "stdout", Regex: e + sep[m.Targets[i].Name] + `(\S+)`}
		if n := utf8.RuneCountInString(m.Targets[i].Source.Regex); n > 1024 {
			t.Fatalf("regex of %d code points", n)
		}
	}
	rec, _ := f.mustRerun(m, dotlab.OutcomeSpecIssue, "timed out")
	if len(rec.Body.Uncompared) != 2 || rec.Body.Uncompared[0].Value != "2.5" || rec.Body.Uncompared[1].Value != "4" {
		t.Fatalf("uncompared = %+v", rec.Body.Uncompared)
	}
	data, err := json.Marshal(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sent dotlab.RunBody
	if err := json.Unmarshal(data, &sent); err != nil {
		t.Fatal(err)
	}
	for _, u := range sent.Uncompared {
		if len(u.Source) > dotlab.MaxUncomparedSource || !utf8.ValidString(u.Source) || !strings.HasPrefix(u.Source, "stdout") {
			t.Fatalf("source of %s: %d bytes, valid %v", u.Name, len(u.Source), utf8.ValidString(u.Source))
		}
	}
	if _, err := dotlab.EvaluateRun(m, &sent); err != nil {
		t.Fatalf("the server refuses the run: %v", dotlab.ErrorDetail(err))
	}
}
