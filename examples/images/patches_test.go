package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
)

// windowsR is an R script written on Windows for R < 4.0, as replication
// packages often are: its first lines pick the working folder with
// choose.dir() (Windows-only and interactive) and it counts the levels of
// a column read.csv gave as a factor (R < 4.0's stringsAsFactors = TRUE).
const windowsR = `# Replication script (R 3.6, Windows)
# Pick the folder that holds the data
setwd(choose.dir())
d <- read.csv(text = "group,extra\ndrug,1.9\ndrug,0.8\nplacebo,0.7\nplacebo,-1.6\ncontrol,0.1\n")
cat("groups =", nlevels(d$group), "\n")
cat("mean =", mean(d$extra), "\n")
`

// The two declared patches: a one-line change for the folder picker, and
// R < 4.0's strings-as-factors said where the data is read (in R 4.2,
// options(stringsAsFactors = TRUE) is deprecated and does nothing).
const (
	chooseDirPatch = `--- a/analysis.R
+++ b/analysis.R
@@ -3 +3 @@
-setwd(choose.dir())
+setwd("/work/code")
`
	factorsPatch = `--- a/analysis.R
+++ b/analysis.R
@@ -4 +4 @@
-d <- read.csv(text = "group,extra\ndrug,1.9\ndrug,0.8\nplacebo,0.7\nplacebo,-1.6\ncontrol,0.1\n")
+d <- read.csv(text = "group,extra\ndrug,1.9\ndrug,0.8\nplacebo,0.7\nplacebo,-1.6\ncontrol,0.1\n", stringsAsFactors = TRUE)
`
)

// TestDeclaredPatchesInTheRImage reruns windowsR in the example R image
// (real runc): as published it is spec_issue (R on Linux has no
// choose.dir); with the folder patch alone it runs but counts 0 groups
// (strings are not factors in R >= 4.0), not_reproduced; with both declared
// patches it is reproduced, and the record carries the patched tree's hash.
func TestDeclaredPatchesInTheRImage(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "chroot", "go")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("needs the R example image (-short)")
	}
	varDir := imagesVar(t)
	ref := buildRecipe(t, dotlabBinary(t), varDir, "r")
	r, err := runner.New(t.TempDir(), sandbox.Runtime{StateDir: filepath.Join(t.TempDir(), "state"), BundleDir: t.TempDir()},
		runner.LocalPolicy(os.TempDir()), dotlab.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Store, err = runner.OpenImageStore(filepath.Join(varDir, "cache")); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "analysis.R"), []byte(windowsR), 0o644); err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(t.TempDir(), "windows-r")
	commit := exampleRepo(t, src, repoDir)
	m := &dotlab.Manifest{
		SpecVersion: dotlab.SpecVersionRuntime, Title: "A Windows R 3.6 script", Source: dotlab.Source{Citation: "test"},
		Datasets: []dotlab.Dataset{}, Code: dotlab.Code{Repository: repoDir, Commit: commit},
		Environment: dotlab.Environment{Image: ref, Env: map[string]string{"TZ": "UTC", "OMP_NUM_THREADS": "1"}},
		Entrypoint:  []string{"Rscript", "analysis.R"},
		Limits:      dotlab.Limits{TimeoutSeconds: 120, MemoryMB: 512, CPUs: 1},
		Targets: []dotlab.Target{
			{Name: "groups", Value: "3", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0"}, Source: &dotlab.TargetSource{Stream: "stdout", Regex: `groups = (\d+)`}},
			{Name: "mean", Value: "0.38", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0.005"}, Source: &dotlab.TargetSource{Stream: "stdout", Regex: `mean = (\S+)`}},
		},
	}
	rerun := func(want dotlab.Outcome, notes ...string) *runner.Record {
		t.Helper()
		if err := manifest.Check(m); err != nil {
			t.Fatalf("manifest: %v", dotlab.ErrorDetail(err))
		}
		rec, err := r.Rerun(context.Background(), m, t.TempDir())
		if err != nil {
			t.Fatalf("no outcome: %v", err)
		}
		if rec.Body.Outcome != want {
			t.Fatalf("outcome %s, want %s; notes: %s", rec.Body.Outcome, want, rec.Body.Notes)
		}
		for _, n := range notes {
			if !strings.Contains(rec.Body.Notes, n) {
				t.Errorf("notes lack %q: %s", n, rec.Body.Notes)
			}
		}
		if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
			t.Errorf("the server would reject run.json: %v", err)
		}
		return rec
	}
	rerun(dotlab.OutcomeSpecIssue, `could not find function "choose.dir"`)

	m.Code.Patches = []dotlab.Patch{{Reason: "choose.dir() is an interactive Windows-only folder picker; the data is read from the code's folder", Diff: chooseDirPatch}}
	rec := rerun(dotlab.OutcomeNotReproduced, "groups")
	t.Logf("folder patch only: %s", rec.Body.Notes)

	m.Code.Patches = append(m.Code.Patches, dotlab.Patch{Reason: "R < 4.0 read strings as factors (stringsAsFactors = TRUE by default)", Diff: factorsPatch})
	rec = rerun(dotlab.OutcomeReproduced)
	if rec.Body.Environment.CodeTreeSHA256 == "" || rec.Body.Environment.CodeCommit != commit {
		t.Fatalf("environment %+v: want the commit and the patched tree's hash", rec.Body.Environment)
	}
	if rec.Body.OutputHashes["stream:stdout"] == "" {
		t.Fatalf("output_hashes %v lack stream:stdout", rec.Body.OutputHashes)
	}

	// A patch that no longer applies (the line it changes is not there) is spec_issue naming it.
	m.Code.Patches[1].Diff = strings.Replace(factorsPatch, "-d <- read.csv(text", "-d <- read.table(text", 1)
	rerun(dotlab.OutcomeSpecIssue, "code.patches[1]", "does not apply", "analysis.R")
}
