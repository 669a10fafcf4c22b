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

const chooseDirPatch = "--- a/analysis.R\n+++ b/analysis.R\n@@ -8 +8 @@\n-setwd(choose.dir())\n+setwd(\"/work/code\")\n"

// runtimeClaim lists a spec v0.2 Student manifest with a declared patch and
// environment.env, and has runner accept it; it returns the claim id.
func runtimeClaim(t *testing.T, s *site, sub, runner *dotlab.Agent, title string) string {
	t.Helper()
	ctx := context.Background()
	raw := sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: title, Seed: "1908", Targets: `[
    {"name": "mean_diff", "value": 1.58, "tolerance": {"type": "absolute", "value": 0.005}},
    {"name": "sd_diff", "value": 1.17, "tolerance": {"type": "absolute", "value": 0.005}}
  ]`})
	raw = strings.Replace(raw, `"spec_version": "0.1"`, `"spec_version": "0.2"`, 1)
	raw = strings.Replace(raw, `"commit": "0123456789abcdef0123456789abcdef01234567"`,
		`"commit": "0123456789abcdef0123456789abcdef01234567", "patches": [{"reason": "choose.dir() is a Windows-only folder picker", "diff": "`+
			strings.ReplaceAll(strings.ReplaceAll(chooseDirPatch, `"`, `\"`), "\n", `\n`)+`"}]`, 1)
	raw = strings.Replace(raw, `"environment": {`, `"environment": {"env": {"TZ": "UTC", "OMP_NUM_THREADS": "1"}, `, 1)
	m, err := manifest.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("manifest: %v", dotlab.ErrorDetail(err))
	}
	h := must(manifest.Hash([]byte(raw)))
	c := must(sqlstoretest.Protocol(s.db).CreateClaim(ctx, sub.ID, dotlab.NewClaim{Raw: []byte(raw), Manifest: m, ManifestHash: h, Field: "statistics"}))
	for {
		j, found, err := sqlstoretest.Protocol(s.db).NextJob(ctx, runner)
		if err != nil || !found {
			t.Fatalf("draw: %+v %v %v", j, found, err)
		}
		if j.ClaimID == c.ID {
			break
		}
		must(sqlstoretest.Protocol(s.db).DeclineJob(ctx, runner.ID, j.ClaimID, dotlab.DeclineCapabilityMismatch))
	}
	must(sqlstoretest.Protocol(s.db).AcceptJob(ctx, runner.ID, c.ID))
	return c.ID
}

// TestClaimAndRunPagesShowWhatThePackageNeeded: the claim page shows each
// declared patch as its diff with its reason and line count beside the
// code's commit, the environment variables, and the captured streams of
// runner and challenger side by side; the run page of a run that printed
// every target and then failed shows the printed values, marked not
// compared, and the patched tree's hash.
func TestClaimAndRunPagesShowWhatThePackageNeeded(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	sub, runner, challenger := s.agent("sub-v2"), s.agent("runner-v2"), s.agent("challenger-v2")
	stdout, stderr, other := strings.Repeat("5", 64), strings.Repeat("6", 64), strings.Repeat("7", 64)
	tree := strings.Repeat("8", 64)

	// A run that printed both targets, then exited 1.
	failed := runtimeClaim(t, s, sub, runner, "A package that crashed after printing")
	body := sqlstoretest.RunBody(failed, "1.58", "1.17", dotlab.OutcomeSpecIssue)
	body.Comparisons = nil
	body.Notes = "the entrypoint exited with status 1"
	body.OutputHashes = map[string]string{"stream:stdout": stdout, "stream:stderr": stderr}
	body.Environment.CodeTreeSHA256 = tree
	body.Uncompared = []dotlab.UncomparedValue{{Name: "mean_diff", Value: "1.58", Source: `stdout, regex "mean_diff = (\S+)"`}, {Name: "sd_diff", Value: "1.1702", Source: "stdout, regex …"}}
	run := must(sqlstoretest.Protocol(s.db).PublishRun(ctx, runner, body, nil))
	code, _, page := s.get("/runs/"+run.ID, "text/html")
	if code != http.StatusOK {
		t.Fatalf("run page: %d", code)
	}
	contains(t, "run page", html.UnescapeString(page), "Printed before the run stopped (not compared)",
		`data-target="sd_diff" data-compared="false"`, "1.1702", `stdout, regex "mean_diff = (\S+)"`,
		"Code tree SHA-256 (after the declared patches)", tree, "stream:stdout", stdout)

	// A reproduced run and a challenge: streams side by side.
	compared := runtimeClaim(t, s, sub, runner, "A patched package, rerun")
	body = sqlstoretest.RunBody(compared, "1.58", "1.17", dotlab.OutcomeReproduced)
	body.OutputHashes["stream:stdout"], body.OutputHashes["stream:stderr"] = stdout, stderr
	must(sqlstoretest.Protocol(s.db).PublishRun(ctx, runner, body, nil))
	ch := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(compared, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: compared, Agrees: new(bool)}
	*ch.Agrees = true
	ch.OutputHashes["stream:stdout"], ch.OutputHashes["stream:stderr"] = stdout, other
	must(sqlstoretest.Protocol(s.db).CreateChallenge(ctx, challenger, ch, nil))
	code, _, page = s.get("/claims/"+compared, "text/html")
	if code != http.StatusOK {
		t.Fatalf("claim page: %d", code)
	}
	page = html.UnescapeString(page)
	contains(t, "claim page", page, "Declared patches", "choose.dir() is a Windows-only folder picker", "<code>analysis.R</code>",
		"+1 −1 lines", "-setwd(choose.dir())\n+setwd(\"/work/code\")", "TZ=UTC", "OMP_NUM_THREADS=1",
		"Captured streams", `data-stream="stream:stdout"`)
	// The patches sit beside the commit, in the manifest's facts.
	if i, j := strings.Index(page, "0123456789abcdef0123456789abcdef01234567"), strings.Index(page, "Declared patches"); i < 0 || j < i {
		t.Errorf("the patches are not listed after the code's commit")
	}
	rows := page[strings.Index(page, `id="streams-table"`):]
	rows = rows[:strings.Index(rows, "</table>")]
	stdoutRow := rows[strings.Index(rows, `data-stream="stream:stdout"`):strings.Index(rows, `data-stream="stream:stderr"`)]
	stderrRow := rows[strings.Index(rows, `data-stream="stream:stderr"`):]
	if !strings.Contains(stdoutRow, `data-same="true"`) || !strings.Contains(stderrRow, `data-same="false"`) || !strings.Contains(stderrRow, other) {
		t.Errorf("streams side by side:\n%s", rows)
	}
}
