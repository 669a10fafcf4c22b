package runner_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/sqlstore"
)

// Tests that what the analysis controls (its output file names, its
// streams) cannot keep an honest runner from publishing its run and
// attaching its logs: the real runner in runc, the real agent steps and a
// real server on SQLite (adversarial review of issues 12 and 13).

var (
	wireLeaksOnce sync.Once
	wireLeaks     *leakcheck.Checker
	wireLeaksErr  error
)

// published lists m on a real server (directly in the store: the fixture's
// manifests name local files, which a listing refuses), lets an agent with
// the fixture's runner draw, rerun, publish and upload its logs
// (agent.RunOnce), and returns the run as the server keeps it and the
// logs it serves.
func (f *fixture) publishedOverHTTP(m *dotlab.Manifest) (*dotlab.Run, []byte) {
	t := f.t
	t.Helper()
	ctx := context.Background()
	wireLeaksOnce.Do(func() { wireLeaks, wireLeaksErr = leakcheck.New() })
	if wireLeaksErr != nil {
		t.Fatal(wireLeaksErr)
	}
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	api, err := httpapi.New(httpapi.Config{Store: db, Leaks: wireLeaks, AllowPrivateURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { api.Close(); srv.Close() })
	c, _ := client.New(srv.URL, "")
	sub, err := c.Register(ctx, dotlab.NewAgent{Name: "submitter", Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := c.Register(ctx, dotlab.NewAgent{Name: "runner", Operator: "test"})
	claim := listManifest(t, db, sub.ID, m)
	var said []string
	a := &agent.Agent{Client: c.WithKey(run.APIKey), Engine: f.r, WorkDir: t.TempDir(), Logf: func(format string, args ...any) {
		said = append(said, strings.TrimSpace(strings.ReplaceAll(format, "%", "")))
	}}
	if id, err := a.RunOnce(ctx); err != nil || id != claim.ID {
		t.Fatalf("RunOnce: %q %v", id, err)
	}
	cv, err := c.Claim(ctx, claim.ID)
	if err != nil || cv.RunID == "" {
		t.Fatalf("claim %+v: %v (agent said %q)", cv, err, said)
	}
	r, err := c.Run(ctx, cv.RunID)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.Logs(ctx, claim.ID)
	if err != nil {
		t.Fatalf("the run's logs were not attached: %v", err)
	}
	return r, logs
}

// TestAnalysisNamesAndStreamsPublish: output files whose names a run body
// cannot carry (not valid UTF-8, or differing only in letter case, which
// the server's strict JSON refuses as keys), and NUL bytes on stdout and
// stderr (refused in any text), leave the run publishable as it is and its
// logs attachable and complete: such files are left out of output_hashes,
// logged and noted; NUL bytes are shown as U+FFFD.
func TestAnalysisNamesAndStreamsPublish(t *testing.T) {
	f := newFixture(t)
	v := func() dotlab.Target {
		return target("v", "1", &dotlab.TargetSource{Stream: "stdout", Regex: `v (\d+)`})
	}
	cases := []struct {
		name, script string
		outcome      dotlab.Outcome
		reported     []string // output_hashes keys
		notes        []string
	}{
		{"names differing in case", `echo v 1; for n in Table1.csv table1.csv TABLE1.CSV keep.csv; do echo $n > "$DOTLAB_OUT_DIR/$n"; done`,
			dotlab.OutcomeReproduced, []string{"keep.csv", "stream:stderr", "stream:stdout"},
			[]string{`output "TABLE1.CSV" is not in output_hashes`, `"Table1.csv"`, `"table1.csv"`, "differs from another output's only in letter case"}},
		{"names not UTF-8", `echo v 1; printf a > "$DOTLAB_OUT_DIR/$(printf 'r\377')"; printf b > "$DOTLAB_OUT_DIR/$(printf 'r\376')"; echo c > "$DOTLAB_OUT_DIR/ok.txt"`,
			dotlab.OutcomeReproduced, []string{"ok.txt", "stream:stderr", "stream:stdout"},
			[]string{`output "r\xfe" is not in output_hashes: its name is not valid UTF-8`, `"r\xff"`}},
		{"NUL on the streams", `printf 'v 1\000\n'; printf 'warn\000ing\n' >&2`,
			dotlab.OutcomeReproduced, []string{"stream:stderr", "stream:stdout"}, nil},
		{"NUL in the quoted stderr", `printf 'Error: bad\000byte\n' >&2; exit 1`,
			dotlab.OutcomeSpecIssue, []string{"stream:stderr", "stream:stdout"}, []string{"exited with status 1", "Error: bad\ufffdbyte"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			m := f.published(c.script, v())
			run, logs := f.publishedOverHTTP(m)
			if run.Outcome != c.outcome {
				t.Fatalf("outcome %s, want %s; notes %q", run.Outcome, c.outcome, run.Body.Notes)
			}
			if got := dotlab.SortedKeys(run.Body.OutputHashes); strings.Join(got, ",") != strings.Join(c.reported, ",") {
				t.Errorf("output_hashes keys %q, want %q", got, c.reported)
			}
			for _, s := range c.notes {
				if !strings.Contains(run.Body.Notes, s) {
					t.Errorf("notes lack %q: %q", s, run.Body.Notes)
				}
			}
			if strings.Contains(run.Body.Notes, "withheld") {
				t.Errorf("the notes were withheld: %q", run.Body.Notes)
			}
			if cov := run.LogCoverage; cov == nil || !cov.Complete {
				t.Errorf("log coverage %+v", cov)
			}
			if strings.Contains(string(logs), `\u0000`) {
				t.Errorf("a NUL reached the logs")
			}
		})
	}
	// Scratch files read by target sources are keyed by their sandbox
	// path: two that differ only in case are left out too.
	t.Run("scratch sources differing in case", func(t *testing.T) {
		f.t = t
		m := f.published(`echo 1 > T.txt; echo 1 > t.txt`,
			target("a", "1", &dotlab.TargetSource{File: "/work/scratch/T.txt", Regex: `(\d+)`}),
			target("b", "1", &dotlab.TargetSource{File: "/work/scratch/t.txt", Regex: `(\d+)`}))
		m.Scratch = true
		run, _ := f.publishedOverHTTP(m)
		if run.Outcome != dotlab.OutcomeReproduced || len(run.Body.OutputHashes) != 2 || run.Body.OutputHashes["stream:stdout"] == "" || !strings.Contains(run.Body.Notes, `output "/work/scratch/t.txt" is not in output_hashes`) ||
			run.LogCoverage == nil || !run.LogCoverage.Complete {
			t.Fatalf("run %+v, coverage %+v", run.Body, run.LogCoverage)
		}
	})
}

// listManifest lists m as a claim of submitter subID straight in the store
// (a test manifest, parsed and hashed as the API would).
func listManifest(t *testing.T, db *sqlstore.DB, subID string, m *dotlab.Manifest) *dotlab.Claim {
	t.Helper()
	if m.Datasets == nil {
		m.Datasets = []dotlab.Dataset{} // "datasets": [], as the schema wants
	}
	raw, _ := json.Marshal(m)
	parsed, err := manifest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := manifest.Hash(raw)
	c, err := sqlstoretest.Protocol(db).CreateClaim(context.Background(), subID, dotlab.NewClaim{Raw: raw, Manifest: parsed, ManifestHash: hash, Field: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
