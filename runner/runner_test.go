package runner_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// fixture is a runner with a busybox image in its store and a git repository
// whose analysis script is chosen per test.
type fixture struct {
	t      *testing.T
	r      *runner.Runner
	image  string // NAME@sha256:…
	data   []byte // the dataset's bytes
	dataSH string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testfix.Need(t, true, "runc", "busybox")
	r, err := runner.New(t.TempDir(), sandbox.Runtime{StateDir: filepath.Join(t.TempDir(), "state"), BundleDir: t.TempDir()}, runner.LocalPolicy("/"), dotlab.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Store.Build(testfix.BusyboxRootfs(t), "localhost/test/busybox")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("x\n1\n2\n3\n4\n")
	sum := sha256.Sum256(data)
	return &fixture{t: t, r: r, image: "localhost/test/busybox@" + d.String(), data: data, dataSH: hex.EncodeToString(sum[:])}
}

// repo commits files (name → content) in a new git repository and returns its path and the commit.
func repo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := r.Worktree()
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	h, err := wt.Commit("analysis", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.org", When: time.Unix(1e9, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, h.String()
}

// meanScript writes the mean and count of the dataset's numbers.
const meanScript = `awk 'NR>1{s+=$1;n++} END{printf "{\"mean\": %s, \"n\": %d}\n", s/n, n}' "$DOTLAB_DATA_DIR/in/data.csv" > "$DOTLAB_OUT_DIR/results.json"`

func (f *fixture) manifest(dataURL, script string) *dotlab.Manifest {
	dir, commit := repo(f.t, map[string]string{"run.sh": script})
	seed := int64(42)
	return &dotlab.Manifest{
		SpecVersion: "0.1", Title: "test", Source: dotlab.Source{Citation: "test"},
		Datasets:    []dotlab.Dataset{{Name: "data", URL: dataURL, SHA256: f.dataSH, Path: "in/data.csv"}},
		Code:        dotlab.Code{Repository: dir, Commit: commit},
		Environment: dotlab.Environment{Image: f.image},
		Seed:        &seed,
		Entrypoint:  []string{"sh", "run.sh"},
		Limits:      dotlab.Limits{TimeoutSeconds: 20, MemoryMB: 128, CPUs: 1},
		Targets: []dotlab.Target{
			{Name: "mean", Value: "2.5", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0"}},
			{Name: "n", Value: "4", Tolerance: dotlab.Tolerance{Type: "relative", Value: "0.01"}},
		},
	}
}

func (f *fixture) fileURL() string {
	p := filepath.Join(f.t.TempDir(), "data.csv")
	os.WriteFile(p, f.data, 0o644)
	return "file://" + p
}

// fresh is a runner sharing the fixture's image store with an empty download cache.
func (f *fixture) fresh(t *testing.T, p runner.Policy) *runner.Runner {
	t.Helper()
	r, err := runner.New(t.TempDir(), f.r.Runtime, p, dotlab.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	r.Store = f.r.Store
	return r
}

func (f *fixture) rerun(m *dotlab.Manifest) (*runner.Record, string, error) {
	f.t.Helper()
	out := f.t.TempDir()
	rec, err := f.r.Rerun(context.Background(), m, out)
	return rec, out, err
}

func (f *fixture) mustRerun(m *dotlab.Manifest, want dotlab.Outcome, noteHas ...string) (*runner.Record, string) {
	f.t.Helper()
	return mustRerun(f.t, f.r, m, want, noteHas...)
}

func mustRerun(t *testing.T, r *runner.Runner, m *dotlab.Manifest, want dotlab.Outcome, noteHas ...string) (*runner.Record, string) {
	t.Helper()
	out := t.TempDir()
	rec, err := r.Rerun(context.Background(), m, out)
	if err != nil {
		t.Fatalf("no outcome: %v", err)
	}
	if rec.Body.Outcome != want {
		t.Fatalf("outcome %s, want %s; notes: %s", rec.Body.Outcome, want, rec.Body.Notes)
	}
	for _, s := range noteHas {
		if !strings.Contains(rec.Body.Notes, s) {
			t.Errorf("notes lack %q: %s", s, rec.Body.Notes)
		}
	}
	return rec, out
}

func readLogs(t *testing.T, out string) []runner.LogEntry {
	t.Helper()
	fh, err := os.Open(filepath.Join(out, runner.LogsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var entries []runner.LogEntry
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e runner.LogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, e.T); err != nil || e.Level == "" || e.Step == "" || e.Msg == "" || e.Data == nil {
			t.Fatalf("log line lacks t/level/step/msg/data: %s", sc.Text())
		}
		entries = append(entries, e)
	}
	return entries
}

func steps(entries []runner.LogEntry) map[string]int {
	n := map[string]int{}
	for _, e := range entries {
		n[e.Step]++
	}
	return n
}

func TestRerunReproducedRecordsEverything(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), meanScript+"\necho \"seed=$DOTLAB_SEED\"\n")
	rec, out := f.mustRerun(m, dotlab.OutcomeReproduced)

	var body dotlab.RunBody
	data, err := os.ReadFile(filepath.Join(out, runner.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	if body.JobID != "" || body.InputHashes["data"] != f.dataSH || body.Environment.ImageDigest != m.Environment.ImageDigest() || *body.Environment.Seed != 42 {
		t.Fatalf("run.json: %s", data)
	}
	if len(body.Comparisons) != 2 || body.Comparisons[0].Rerun != "2.5" || body.Comparisons[1].Rerun != "4" {
		t.Fatalf("comparisons: %+v", body.Comparisons)
	}
	sum := sha256.Sum256([]byte("{\"mean\": 2.5, \"n\": 4}\n"))
	if body.OutputHashes["results.json"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("output hash: %v", body.OutputHashes)
	}
	// The server's own check accepts what the runner publishes.
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("server would reject run.json: %v", err)
	}
	n := steps(readLogs(t, out))
	for _, s := range []string{"run", "inputs", "environment", "code", "execute", "outputs", "compare", "outcome"} {
		if n[s] == 0 {
			t.Errorf("logs.jsonl has no %q entry", s)
		}
	}
	if n["compare"] != 2 {
		t.Errorf("want one compare entry per target, got %d", n["compare"])
	}
	logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
	if !strings.Contains(string(logs), "seed=42") {
		t.Errorf("DOTLAB_SEED not seen by the analysis")
	}
	if _, err := os.Stat(filepath.Join(out, runner.OutSub, "results.json")); err != nil {
		t.Errorf("results.json not copied to out/: %v", err)
	}
}

func TestRerunNotReproducedAndExtraKeys(t *testing.T) {
	f := newFixture(t)
	m := f.manifest(f.fileURL(), `echo '{"mean": 2.6, "n": 4, "debug": "x"}' > "$DOTLAB_OUT_DIR/results.json"`)
	rec, _ := f.mustRerun(m, dotlab.OutcomeNotReproduced, "mean: rerun 2.6 vs published 2.5", "debug")
	if len(rec.Extra) != 1 || rec.Extra[0] != "debug" {
		t.Fatalf("extra keys: %v", rec.Extra)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Fatalf("server would reject run.json: %v", err)
	}
}

// dataServer serves the dataset with a behaviour chosen per request number.
func dataServer(t *testing.T, data []byte, serve func(n int, w http.ResponseWriter)) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(int(hits.Add(1)), w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/data.csv", &hits
}

func TestInputsOverHTTP(t *testing.T) {
	f := newFixture(t)
	full := func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body)
	}
	truncated := func(w http.ResponseWriter) {
		w.Header().Set("Content-Length", fmt.Sprint(len(f.data)))
		w.Write(f.data[:len(f.data)/2])
	}

	t.Run("correct", func(t *testing.T) {
		url, _ := dataServer(t, f.data, func(_ int, w http.ResponseWriter) { full(w, f.data) })
		mustRerun(t, f.fresh(t, runner.LocalPolicy("/")), f.manifest(url, meanScript), dotlab.OutcomeReproduced)
	})

	t.Run("one byte flipped", func(t *testing.T) {
		bad := append([]byte(nil), f.data...)
		bad[3] ^= 0x01
		sum := sha256.Sum256(bad)
		url, _ := dataServer(t, f.data, func(_ int, w http.ResponseWriter) { full(w, bad) })
		r := f.fresh(t, runner.LocalPolicy("/"))
		rec, out := mustRerun(t, r, f.manifest(url, meanScript), dotlab.OutcomeInputMismatch,
			"dataset data", f.dataSH, hex.EncodeToString(sum[:]))
		if rec.Body.InputHashes["data"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("input_hashes: %v", rec.Body.InputHashes)
		}
		if n := steps(readLogs(t, out)); n["execute"] != 0 || n["environment"] != 0 {
			t.Fatalf("work went on after an input mismatch: %v", n)
		}
		if _, err := os.Stat(r.Cache.Path(hex.EncodeToString(sum[:]))); err == nil {
			t.Fatalf("a mismatching download was cached")
		}
		if _, err := dotlab.EvaluateRun(f.manifest(url, meanScript), &rec.Body); err != nil {
			t.Fatalf("server would reject the input_mismatch run: %v", err)
		}
	})

	t.Run("truncated once, then whole", func(t *testing.T) {
		url, hits := dataServer(t, f.data, func(n int, w http.ResponseWriter) {
			if n == 1 {
				truncated(w)
				return
			}
			full(w, f.data)
		})
		rec, err := f.fresh(t, runner.LocalPolicy("/")).Rerun(context.Background(), f.manifest(url, meanScript), t.TempDir())
		if err != nil || rec.Body.Outcome != dotlab.OutcomeReproduced {
			t.Fatalf("retry after truncation: %v %+v", err, rec)
		}
		if hits.Load() != 2 {
			t.Fatalf("want 2 requests, got %d", hits.Load())
		}
	})

	t.Run("always truncated", func(t *testing.T) {
		url, hits := dataServer(t, f.data, func(_ int, w http.ResponseWriter) { truncated(w) })
		r2 := f.fresh(t, runner.LocalPolicy("/"))
		out := t.TempDir()
		_, err := r2.Rerun(context.Background(), f.manifest(url, meanScript), out)
		if err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("want a truncation error and no outcome, got %v", err)
		}
		if hits.Load() != 3 {
			t.Fatalf("want 3 attempts, got %d", hits.Load())
		}
		if _, err := os.Stat(filepath.Join(out, runner.RunFile)); err == nil {
			t.Fatalf("run.json written without an outcome")
		}
		tmp, _ := os.ReadDir(filepath.Join(filepath.Dir(r2.Cache.Path("x")), "..", "tmp"))
		if len(tmp) != 0 {
			t.Fatalf("partial downloads left in the cache: %v", tmp)
		}
	})

	t.Run("404", func(t *testing.T) {
		url, _ := dataServer(t, f.data, func(_ int, w http.ResponseWriter) { http.Error(w, "gone", http.StatusNotFound) })
		rec, err := f.fresh(t, runner.LocalPolicy("/")).Rerun(context.Background(), f.manifest(url, meanScript), t.TempDir())
		if err != nil || rec.Body.Outcome != dotlab.OutcomeSpecIssue || !strings.Contains(rec.Body.Notes, "dataset data") || !strings.Contains(rec.Body.Notes, "404") {
			t.Fatalf("404: %v %+v", err, rec)
		}
	})

	t.Run("strict policy refuses loopback", func(t *testing.T) {
		url, hits := dataServer(t, f.data, func(_ int, w http.ResponseWriter) { full(w, f.data) })
		r2 := f.fresh(t, runner.Policy{})
		m := f.manifest(strings.Replace(url, "http://", "https://", 1), meanScript)
		rec, err := r2.Rerun(context.Background(), m, t.TempDir())
		if err != nil || rec.Body.Outcome != dotlab.OutcomeSpecIssue || !strings.Contains(rec.Body.Notes, "refused") {
			t.Fatalf("strict policy: %v %+v", err, rec)
		}
		if hits.Load() != 0 {
			t.Fatalf("the loopback server was contacted")
		}
	})
}

func TestSpecIssues(t *testing.T) {
	f := newFixture(t)
	url := f.fileURL()
	cases := []struct {
		name   string
		script string
		limits dotlab.Limits
		note   string
	}{
		{"non-zero exit", `echo boom >&2; exit 3`, dotlab.Limits{}, "exited with status 3"},
		{"missing results", `true`, dotlab.Limits{}, "results.json is missing"},
		{"malformed results", `echo '{"mean": "2.5", "n": 4}' > $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "$.mean: must be a finite number"},
		{"missing target", `echo '{"mean": 2.5}' > $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "$.n: missing"},
		{"not an object", `echo '[2.5, 4]' > $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "must be an object"},
		{"duplicate key", `echo '{"mean": 2.5, "mean": 9, "n": 4}' > $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "results.json is malformed"},
		{"NaN", `echo '{"mean": NaN, "n": 4}' > $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "results.json is malformed"},
		{"trailing data", `echo '{"mean": 2.5, "n": 4} {}' > $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "results.json is malformed"},
		{"symlinked results", `echo '{"mean": 2.5, "n": 4}' > /tmp/r.json; ln -s /tmp/r.json $DOTLAB_OUT_DIR/results.json`, dotlab.Limits{}, "symlink in the output directory: results.json"},
		{"symlink beside results", meanScript + `; ln -s results.json $DOTLAB_OUT_DIR/alias`, dotlab.Limits{}, "symlink in the output directory: alias"},
		{"timeout", `while :; do :; done`, dotlab.Limits{TimeoutSeconds: 1}, "timed out after limits.timeout_seconds=1"},
		{"out of memory", `x=$(head -c 300000000 /dev/zero | tr '\0' a)`, dotlab.Limits{MemoryMB: 64}, "limits.memory_mb=64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := f.manifest(url, c.script)
			if c.limits.TimeoutSeconds != 0 {
				m.Limits.TimeoutSeconds = c.limits.TimeoutSeconds
			}
			if c.limits.MemoryMB != 0 {
				m.Limits.MemoryMB = c.limits.MemoryMB
			}
			rec, _ := f.mustRerun(m, dotlab.OutcomeSpecIssue, c.note)
			if len(rec.Body.Comparisons) != 0 {
				t.Errorf("spec_issue with comparisons: %+v", rec.Body.Comparisons)
			}
			if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
				t.Errorf("server would reject the spec_issue run: %v", err)
			}
		})
	}
}

func TestCodeProblems(t *testing.T) {
	f := newFixture(t)
	url := f.fileURL()
	m := f.manifest(url, meanScript)
	m.Code.Commit = strings.Repeat("ab", 20)
	f.mustRerun(m, dotlab.OutcomeSpecIssue, "commit not found")

	m = f.manifest(url, meanScript)
	m.Code.Repository = filepath.Join(t.TempDir(), "nothing-here")
	f.mustRerun(m, dotlab.OutcomeSpecIssue, "repository not found")

	m = f.manifest(url, meanScript)
	m.Environment.Image = "localhost/test/busybox@sha256:" + strings.Repeat("0", 64)
	m.Environment.Image = "127.0.0.1:1/none@sha256:" + strings.Repeat("0", 64)
	if _, _, err := f.rerun(m); err == nil {
		t.Fatalf("unreachable registry must give no outcome")
	}
}

func TestRerunWithRunsc(t *testing.T) {
	f := newFixture(t)
	testfix.Need(t, true, "runsc")
	r := f.fresh(t, runner.LocalPolicy("/"))
	r.Runtime = sandbox.Runtime{Name: "runsc", StateDir: filepath.Join(t.TempDir(), "runsc-state")}
	mustRerun(t, r, f.manifest(f.fileURL(), meanScript), dotlab.OutcomeReproduced)
}

func TestHostileRunsAreContainedAndRecorded(t *testing.T) {
	f := newFixture(t)
	url := f.fileURL()
	t.Run("fork bomb", func(t *testing.T) {
		// The parent then spins on a builtin (no fork): with the pids limit
		// exhausted a forked "sleep" could fail and end the run early.
		m := f.manifest(url, `bomb() { bomb | bomb & }; bomb; while :; do :; done`)
		m.Limits.TimeoutSeconds = 2
		mustRerun(t, f.r, m, dotlab.OutcomeSpecIssue, "timed out")
	})
	t.Run("huge output", func(t *testing.T) {
		r := f.fresh(t, runner.LocalPolicy("/"))
		r.OutputBytes = 4 << 20
		m := f.manifest(url, meanScript+`; dd if=/dev/zero of="$DOTLAB_OUT_DIR/big" bs=1M count=64 2>/dev/null; exit 0`)
		_, out := mustRerun(t, r, m, dotlab.OutcomeSpecIssue, "output directory reached its size or file cap")
		var total int64
		filepath.Walk(filepath.Join(out, runner.OutSub), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return nil
		})
		if total > 4<<20 {
			t.Fatalf("out holds %d bytes over a 4 MiB cap", total)
		}
	})
	t.Run("network and host secrets", func(t *testing.T) {
		t.Setenv("DOTLAB_TEST_TOKEN", "tok-should-not-leak")
		m := f.manifest(url, meanScript+`; env > "$DOTLAB_OUT_DIR/env.txt"; wget -q -T 2 -O - http://127.0.0.1:1/ || exit 7`)
		_, out := mustRerun(t, f.r, m, dotlab.OutcomeSpecIssue, "exited with status 7")
		env, _ := os.ReadFile(filepath.Join(out, runner.OutSub, "env.txt"))
		if strings.Contains(string(env), "tok-should-not-leak") || !strings.Contains(string(env), "DOTLAB_SEED=42") {
			t.Fatalf("sandbox environment: %s", env)
		}
	})
}
