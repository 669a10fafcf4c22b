package demo

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
)

// TestDemoEndToEnd runs the README's main job (Run, as `dotlab demo --exit`) on the
// real example claims with real runc containers and checks every verdict
// against what the published numbers lead to. It needs root, runc, git,
// debootstrap and Debian's mirror (it builds the example image); outside CI
// it skips when one is missing.
func TestDemoEndToEnd(t *testing.T) {
	for _, tool := range []string{"runc", "git", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, tool+" is not installed")
		}
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "the demo needs root (runc)")
	}
	if testing.Short() {
		t.Skip("-short: the demo builds an image and runs about 20 containers")
	}
	// The demo needs the dotlab binary itself (it calls `dotlab image build`).
	bin := buildDotlab(t)
	varDir := os.Getenv("DOTLAB_DEMO_VAR") // reuse a var dir (image cache) when set
	if varDir == "" {
		varDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var log strings.Builder
	results, err := Run(ctx, Options{VarDir: varDir, ExamplesDir: "../examples", Addr: "127.0.0.1:0", ArchiveAddr: "127.0.0.1:0",
		Exit: true, ChallengeWindow: 30 * time.Second, Binary: bin, Version: "test", Out: io.MultiWriter(&log, testWriter{t})})
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if len(results) != 6 {
		t.Fatalf("%d claims, want 6", len(results))
	}
	disputes := 0
	for _, r := range results {
		if r.Claim.State != dotlab.StateSettled || r.Claim.Outcome != r.Example.Expect {
			t.Errorf("%s (%s): %s %s, want settled %s", r.Claim.ID, r.Example.Dir, r.Claim.State, r.Claim.Outcome, r.Example.Expect)
		}
		// Every official run carries its logs, judged complete unless its
		// values were misreported (the staged dispute): the log then shows
		// what the runner really computed (docs/protocol.md §6 "Log coverage").
		if r.Run == nil || r.Run.LogCoverage == nil || r.Run.LogsSHA256 == "" || r.Run.LogsUploadedAt == nil {
			t.Errorf("%s: run without attached logs: %+v", r.Claim.ID, r.Run)
		} else if cov := r.Run.LogCoverage; cov.Complete == r.Disputed {
			t.Errorf("%s (disputed %v): log coverage %d of %d, missing %q", r.Claim.ID, r.Disputed, cov.Covered, cov.Required, cov.Missing)
		}
		if r.Disputed {
			disputes++
			if run := r.Run; run == nil || !run.Overturned || run.SettledOutcome != r.Example.Expect || run.DisputeID != r.Claim.ID || run.OverturnedBy == "" {
				t.Errorf("%s: the misreported run does not say it was overturned: %+v", r.Claim.ID, run)
			}
			challenger := 0
			for _, v := range r.Votes {
				if v.Vote == dotlab.VoteChallenger {
					challenger++
				}
			}
			if len(r.Votes) != 3 || challenger < 2 {
				t.Errorf("%s: dispute votes %+v, want a 3-vote majority for the challenger", r.Claim.ID, r.Votes)
			}
			continue
		}
		// Deterministic claims: the challenger's rerun produced the very
		// same output files as the runner's.
		if r.Run != nil && r.Run.Outcome.Compared() {
			if len(r.Challs) == 0 {
				t.Errorf("%s: no challenge", r.Claim.ID)
			}
			for _, ch := range r.Challs {
				if !ch.Agrees || !sameHashes(ch.OutputHashes, r.Run.Body.OutputHashes) || len(ch.OutputHashes) == 0 {
					t.Errorf("%s: challenge %s agrees=%v hashes %v vs run %v", r.Claim.ID, ch.ID, ch.Agrees, ch.OutputHashes, r.Run.Body.OutputHashes)
				}
			}
		}
	}
	if disputes != 1 {
		t.Errorf("%d disputes, want exactly 1", disputes)
	}
	if !strings.Contains(log.String(), "Every claim settled with the verdict its published numbers lead to.") {
		t.Errorf("final line missing")
	}
}

func sameHashes(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("required in CI: %s", why)
	}
	t.Skip(why)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func buildDotlab(t *testing.T) string {
	t.Helper()
	bin := t.TempDir() + "/dotlab"
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/dotlab").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
