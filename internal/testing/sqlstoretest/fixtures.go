package sqlstoretest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// Clock is a settable test clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Dataset hash and image digest used by ManifestJSON.
const (
	DataSHA256  = "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"
	ImageDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

// ManifestJSON returns a valid manifest (Student 1908 style: targets mean_diff
// 1.58 and sd_diff 1.17, absolute tolerance 0.005) made unique by title.
func ManifestJSON(title string, requires ...string) []byte {
	if requires == nil {
		requires = []string{}
	}
	return []byte(StudentManifest(ManifestParts{Title: title, Dependencies: `{"python3": "3.11.2"}`, Seed: "1908", Requires: requires,
		Targets: `[
    {"name": "mean_diff", "value": 1.58, "tolerance": {"type": "absolute", "value": 0.005}},
    {"name": "sd_diff", "value": 1.17, "tolerance": {"type": "absolute", "value": 0.005}}
  ]`}))
}

// ManifestParts are the parts of a Student (1908) test manifest that tests
// vary; the rest (source, the sleep dataset, code, entrypoint) is fixed.
type ManifestParts struct {
	Title        string
	DataSHA256   string   // the sleep dataset's pin (default DataSHA256)
	ImageDigest  string   // the image's digest (default ImageDigest)
	Dependencies string   // environment.dependencies as JSON object text ("" leaves it out)
	Seed         string   // the seed as JSON number text ("" sets none)
	Requires     []string // nil leaves requires out
	Targets      string   // the targets as JSON array text
}

// StudentManifest returns the manifest text of p (spec v0.1; valid when
// p's parts are).
func StudentManifest(p ManifestParts) string {
	if p.DataSHA256 == "" {
		p.DataSHA256 = DataSHA256
	}
	if p.ImageDigest == "" {
		p.ImageDigest = ImageDigest
	}
	env := fmt.Sprintf(`{"image": "registry.example.org/python@%s"}`, p.ImageDigest)
	if p.Dependencies != "" {
		env = fmt.Sprintf(`{"image": "registry.example.org/python@%s", "dependencies": %s}`, p.ImageDigest, p.Dependencies)
	}
	var opt strings.Builder
	if p.Seed != "" {
		fmt.Fprintf(&opt, "  \"seed\": %s,\n", p.Seed)
	}
	if p.Requires != nil {
		req, _ := json.Marshal(p.Requires)
		fmt.Fprintf(&opt, "  \"requires\": %s,\n", req)
	}
	return fmt.Sprintf(`{
  "spec_version": "0.1",
  "title": %q,
  "source": {"citation": "Student (1908). The probable error of a mean. Biometrika 6(1):1-25.", "doi": "10.1093/biomet/6.1.1"},
  "datasets": [{"name": "sleep", "url": "https://data.example.org/sleep.csv", "sha256": %q, "path": "sleep.csv"}],
  "code": {"repository": "https://code.example.org/sleep.git", "commit": "0123456789abcdef0123456789abcdef01234567"},
  "environment": %s,
%s  "entrypoint": ["python3", "analysis.py"],
  "targets": %s
}`, p.Title, p.DataSHA256, env, opt.String(), p.Targets)
}

// NewClaim parses ManifestJSON(title, requires…) into a listing.
func NewClaim(t testing.TB, title string, requires ...string) dotlab.NewClaim {
	t.Helper()
	raw := ManifestJSON(title, requires...)
	m, err := manifest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	h, err := manifest.Hash(raw)
	if err != nil {
		t.Fatal(err)
	}
	return dotlab.NewClaim{Raw: raw, Manifest: m, ManifestHash: h, Field: "statistics"}
}

// RunBody returns a run body for job with the given rerun values for
// mean_diff and sd_diff and the declared outcome.
func RunBody(job, mean, sd string, outcome dotlab.Outcome) *dotlab.RunBody {
	seed := int64(1908)
	return &dotlab.RunBody{
		JobID:        job,
		InputHashes:  map[string]string{"sleep": DataSHA256},
		OutputHashes: map[string]string{"results.json": "2222222222222222222222222222222222222222222222222222222222222222"},
		Environment:  dotlab.RunEnvironment{ImageDigest: ImageDigest, Seed: &seed},
		Comparisons:  []dotlab.RunComparison{{Name: "mean_diff", Rerun: dotlab.Decimal(mean)}, {Name: "sd_diff", Rerun: dotlab.Decimal(sd)}},
		Outcome:      outcome,
	}
}

// Logs returns a logs.jsonl for body, a run of a ManifestJSON claim, with
// one line per item the server's coverage check wants (docs/protocol.md §6
// "Log coverage"), in the runner's format: the environment, each input, the
// command and its exit, each output, each comparison, the outcome. Lines of
// the steps named in without are left out (e.g. "compare").
func Logs(body *dotlab.RunBody, without ...string) []byte {
	skip := map[string]bool{}
	for _, s := range without {
		skip[s] = true
	}
	var out []byte
	n := 0
	add := func(step, msg string, data any) {
		n++
		if skip[step] {
			return
		}
		line, _ := json.Marshal(map[string]any{"t": fmt.Sprintf("2026-01-01T00:00:%02dZ", n%60), "level": "info", "step": step, "msg": msg, "data": data})
		out = append(append(out, line...), '\n')
	}
	add("run", "rerun started", map[string]any{"title": "fixture"})
	for _, name := range dotlab.SortedKeys(body.InputHashes) {
		add("inputs", "dataset "+name+" hash verified", map[string]any{"name": name, "expected": body.InputHashes[name], "actual": body.InputHashes[name]})
	}
	add("environment", "image resolved by digest", map[string]any{"digest": body.Environment.ImageDigest})
	add("execute", "command: python3 analysis.py", map[string]any{"argv": []string{"python3", "analysis.py"}})
	add("execute", "command exited with status 0", map[string]any{"exit_code": 0})
	for _, name := range dotlab.SortedKeys(body.OutputHashes) {
		add("outputs", "output "+name, map[string]any{"path": name, "sha256": body.OutputHashes[name]})
	}
	for _, c := range body.Comparisons {
		add("compare", c.Name, map[string]any{"name": c.Name, "rerun": c.Rerun})
	}
	add("outcome", string(body.Outcome), map[string]any{"outcome": body.Outcome})
	return out
}
