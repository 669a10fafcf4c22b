package sqlstoretest

import (
	"encoding/json"
	"fmt"
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
	req, _ := json.Marshal(requires)
	return []byte(fmt.Sprintf(`{
  "spec_version": "0.1",
  "title": %q,
  "source": {"citation": "Student (1908). The probable error of a mean. Biometrika 6(1):1-25.", "doi": "10.1093/biomet/6.1.1"},
  "datasets": [{"name": "sleep", "url": "https://data.example.org/sleep.csv", "sha256": %q, "path": "sleep.csv"}],
  "code": {"repository": "https://code.example.org/sleep.git", "commit": "0123456789abcdef0123456789abcdef01234567"},
  "environment": {"image": "registry.example.org/python@%s", "dependencies": {"python3": "3.11.2"}},
  "seed": 1908,
  "requires": %s,
  "entrypoint": ["python3", "analysis.py"],
  "targets": [
    {"name": "mean_diff", "value": 1.58, "tolerance": {"type": "absolute", "value": 0.005}},
    {"name": "sd_diff", "value": 1.17, "tolerance": {"type": "absolute", "value": 0.005}}
  ]
}`, title, DataSHA256, ImageDigest, req))
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
