package demo

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
)

// TestDemoEndToEnd runs the README's main job (Run, as `dotlab demo --exit`) on the
// real example claims with real runc containers and checks every verdict
// against what the published numbers lead to. It needs root, runc, git,
// debootstrap and Debian's mirror (it builds the example images); outside CI
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
	varDir := os.Getenv("DOTLAB_DEMO_VAR") // keep the demo's state when set
	if varDir == "" {
		varDir = t.TempDir()
	}
	// The images are built (once, under a lock) in the var dir the image
	// recipes' tests use: $DOTLAB_IMAGES_VAR, else the repository's var/.
	imagesVar := os.Getenv("DOTLAB_IMAGES_VAR")
	if imagesVar == "" {
		imagesVar = "../var"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	var log strings.Builder
	results, err := Run(ctx, Options{VarDir: varDir, ImagesVar: imagesVar, ExamplesDir: "../examples", Addr: "127.0.0.1:0", ArchiveAddr: "127.0.0.1:0",
		Exit: true, ChallengeWindow: 30 * time.Second, Binary: bin, Version: "test", Out: io.MultiWriter(&log, testWriter{t})})
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if len(results) != 8 {
		t.Fatalf("%d claims, want 8", len(results))
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
		if r.Example.Manifest != "" {
			checkPackage(t, r)
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
	if _, err := os.Stat(filepath.Join(imagesVar, "images", "python.log")); err != nil || !strings.Contains(log.String(), "(build output in ") {
		t.Errorf("the python recipe's build output is not in its log: %v", err)
	}
	if !strings.Contains(log.String(), "a hand rerun of "+filepath.Join(varDir, "manifests")+" now fails with connection refused") {
		t.Errorf("the closing output does not say hand reruns need the demo running")
	}
	if !strings.Contains(log.String(), "Every claim settled with the verdict its published numbers lead to.") {
		t.Errorf("final line missing")
	}
}

// checkPackage: a replication package as published ran as it is — its own
// entrypoint, no datasets, no helper files, a scratch copy — with every
// target read from what it printed or wrote (recorded in the run's log),
// and the scratch files read are among the run's output hashes.
func checkPackage(t *testing.T, r Result) {
	t.Helper()
	m := r.Claim.Manifest
	if len(m.Datasets) != 0 || len(m.Helpers) != 0 || !m.Scratch {
		t.Errorf("%s: datasets %v, helpers %v, scratch %v: want the package as published", r.Example.Dir, m.Datasets, m.Helpers, m.Scratch)
	}
	if e := strings.Join(m.Entrypoint, " "); e != "python3 analysis.py" && e != "Rscript analysis.R" {
		t.Errorf("%s: entrypoint %q is not the package's own", r.Example.Dir, e)
	}
	files := 0
	for _, tg := range m.Targets {
		if tg.Source == nil {
			t.Errorf("%s: target %s has no source (the package writes no results.json)", r.Example.Dir, tg.Name)
		} else if tg.Source.File != "" {
			files++
			if _, ok := r.Run.Body.OutputHashes[tg.Source.File]; !ok {
				t.Errorf("%s: the run's output hashes %v lack %s, which target %s read", r.Example.Dir, r.Run.Body.OutputHashes, tg.Source.File, tg.Name)
			}
		}
	}
	if files == 0 {
		t.Errorf("%s: no target reads a file the package writes", r.Example.Dir)
	}
	if r.Run.Body.Environment.CodeCommit != m.Code.Commit {
		t.Errorf("%s: the run records code commit %q, the manifest pins %s", r.Example.Dir, r.Run.Body.Environment.CodeCommit, m.Code.Commit)
	}
}

// sameHashes compares two runs' output file hashes. The captured streams
// ("stream:stdout", "stream:stderr") are left out: they are equal only
// where a program prints nothing that varies between runs (timings, paths).
func sameHashes(a, b map[string]string) bool {
	files := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if !strings.HasPrefix(k, "stream:") {
				out[k] = v
			}
		}
		return out
	}
	a, b = files(a), files(b)
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
