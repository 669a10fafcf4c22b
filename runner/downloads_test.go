package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
)

// TestMain lets this test binary be the download responder the sandbox
// re-executes (sandbox.ResponderArg).
func TestMain(m *testing.M) {
	sandbox.RunResponderIfAsked()
	os.Exit(m.Run())
}

// TestPinnedDownloads: a spec v0.2 manifest's download is fetched and
// verified before the run, recorded as input_hashes["download:<name>"]
// and answered inside the sandbox through http_proxy (busybox wget) from
// the verified bytes, while the origin is not asked again; an unpinned URL
// is refused with a warn line naming it; the server accepts the run and
// its logs cover it; one changed byte at the origin is input_mismatch with
// nothing executed.
func TestPinnedDownloads(t *testing.T) {
	f := newFixture(t)
	body := []byte("v\n1\n2\n3\n")
	served := 0
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.Write(body)
	}))
	defer origin.Close()
	url := origin.URL + "/lab/values.csv?v=1"
	m := f.manifest(f.fileURL(), `set -e
wget -q -O /tmp/values.csv '`+url+`'
wget -q -O /dev/null '`+origin.URL+`/lab/other.csv' || echo "other refused"
awk 'NR>1{s+=$1;n++} END{printf "{\"mean\": %s, \"n\": %d}\n", s/n, n}' /tmp/values.csv > "$DOTLAB_OUT_DIR/results.json"`)
	m.SpecVersion = dotlab.SpecVersionRuntime
	m.Targets[0].Value = "2"
	m.Targets[1].Value = "3"
	sum := sha256.Sum256(body)
	m.Downloads = []dotlab.Download{{Name: "values", URL: url, SHA256: hex.EncodeToString(sum[:])}}
	rec, out, err := f.rerun(m)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
	if rec.Body.Outcome != dotlab.OutcomeReproduced {
		t.Fatalf("outcome %s: %s\n%s", rec.Body.Outcome, rec.Body.Notes, logs)
	}
	if got := rec.Body.InputHashes["download:values"]; got != m.Downloads[0].SHA256 {
		t.Errorf(`input_hashes["download:values"] = %q`, got)
	}
	if served != 1 {
		t.Errorf("the origin was asked %d times, want once (by the runner, before the run)", served)
	}
	for _, want := range []string{`"served GET ` + url + ` from its pinned download"`, `"level":"warn","step":"downloads","msg":"refused GET ` + origin.URL + `/lab/other.csv (not pinned)`} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("logs.jsonl lacks %s", want)
		}
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Errorf("the server would reject the run: %v", err)
	}
	if c := dotlab.CheckLogCoverage(m, &rec.Body, logs); !c.Complete {
		t.Errorf("log coverage incomplete: %+v", c)
	}

	body = []byte("v\n1\n2\n4\n")
	rec, out, err = f.rerun(m)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ = os.ReadFile(filepath.Join(out, runner.LogsFile))
	if rec.Body.Outcome != dotlab.OutcomeInputMismatch || !strings.Contains(rec.Body.Notes, "download values: expected sha256") || strings.Contains(string(logs), `"step":"execute"`) {
		t.Errorf("changed byte: outcome %s, notes %q", rec.Body.Outcome, rec.Body.Notes)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Errorf("the server would reject the input_mismatch run: %v", err)
	}
}
