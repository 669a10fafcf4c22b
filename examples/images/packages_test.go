package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/demo"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
)

// packageExample is one of the package-shaped examples under examples/claims:
// code written the way replication packages are written (it prints its
// tables and writes CSV files and a figure next to itself; nothing in it
// knows of results.json or DOTLAB_*), on data that the image's Debian
// packages ship, with the paper's numbers as targets read by target sources.
type packageExample struct {
	dir    string // under examples/claims
	recipe string // image recipe under examples/images
}

var packageExamples = []packageExample{
	{dir: "viechtbauer-2010-bcg", recipe: "r"},
	{dir: "longley-1967", recipe: "python-sci"},
}

// The example code repositories are committed as the demo commits them
// (demo.CommitExample), so the commit pinned in manifest.json is checked here.

// TestReplicationPackages reruns both package-shaped examples end to end with
// the real runner (runner.New + Rerun, real runc): the scientific images are
// built by their recipes (cached in the var directory as for
// TestScientificImages), each manifest.json is read as committed, its code
// repository made from code/ (the commit must be the pinned one) and its
// image re-pinned to the digest just built (digests differ per machine; the
// committed one is this machine's at the time of writing). Every run must be
// reproduced; the log gives each target's published and rerun values.
func TestReplicationPackages(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "chroot", "go")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds two Debian images and reruns two packages (-short)")
	}
	start := time.Now()
	varDir := imagesVar(t)
	bin := dotlabBinary(t)
	r, err := runner.New(t.TempDir(), sandbox.Runtime{StateDir: filepath.Join(t.TempDir(), "state"), BundleDir: t.TempDir()},
		runner.LocalPolicy(os.TempDir()), dotlab.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Store, err = runner.OpenImageStore(filepath.Join(varDir, "cache")); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "example\ttarget\tpublished\ttolerance\trerun\tdifference\tmatch")
	for _, ex := range packageExamples {
		t.Run(ex.dir, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "claims", ex.dir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Parse(raw)
			if err != nil {
				t.Fatalf("manifest.json: %v", err)
			}
			if len(m.Datasets) != 0 || len(m.Helpers) != 0 {
				t.Errorf("datasets %v, helpers %v: the data is in the image, the code is the package's own", m.Datasets, m.Helpers)
			}
			repoDir := filepath.Join(t.TempDir(), ex.dir)
			commit := exampleRepo(t, filepath.Join("..", "claims", ex.dir, "code"), repoDir)
			if commit != m.Code.Commit {
				t.Errorf("code/ commits as %s, manifest.json pins %s (update code.commit)", commit, m.Code.Commit)
			}
			m.Code.Repository, m.Code.Commit = repoDir, commit

			built := time.Now()
			ref := buildRecipe(t, bin, varDir, ex.recipe)
			if ref != m.Environment.Image {
				t.Logf("image re-pinned to the one built here: %s (manifest.json pins %s)", ref, m.Environment.Image)
			}
			m.Environment.Image = ref
			buildTime := time.Since(built)

			out := t.TempDir()
			ran := time.Now()
			rec, err := r.Rerun(context.Background(), m, out)
			if err != nil {
				t.Fatalf("no outcome: %v", err)
			}
			if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
				t.Errorf("the server would reject run.json: %v", err)
			}
			for _, c := range rec.Comparisons {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%v\n", ex.dir, c.Name, c.Published, c.ToleranceType, c.Tolerance, c.Rerun, c.Difference, c.Match)
			}
			t.Logf("%s: outcome %s; image %s (build.sh %v), rerun %v (first one unpacks the image)",
				ex.dir, rec.Body.Outcome, ref, buildTime.Round(time.Second), time.Since(ran).Round(100*time.Millisecond))
			if rec.Body.Outcome != dotlab.OutcomeReproduced {
				t.Fatalf("outcome %s, want reproduced; notes: %s", rec.Body.Outcome, rec.Body.Notes)
			}
			if rec.Body.Environment.CodeCommit != commit {
				t.Errorf("run.json records code commit %q, want %s", rec.Body.Environment.CodeCommit, commit)
			}
		})
	}
	tw.Flush()
	t.Logf("published and rerun values (total %v):\n%s", time.Since(start).Round(time.Second), table.String())
}

// imagesVar is the var directory the image recipes cache their rootfs in:
// $DOTLAB_IMAGES_VAR, else the repository's var/.
func imagesVar(t *testing.T) string {
	t.Helper()
	varDir := os.Getenv("DOTLAB_IMAGES_VAR")
	if varDir == "" {
		varDir = filepath.Join("..", "..", "var")
	}
	varDir, err := filepath.Abs(varDir)
	if err != nil {
		t.Fatal(err)
	}
	return varDir
}

// dotlabBinary builds cmd/dotlab (the recipes pack with `dotlab image build`).
func dotlabBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dotlab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/dotlab").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// buildRecipe runs examples/images/NAME/build.sh (the rootfs cached in
// varDir) and returns the reference NAME@DIGEST it printed.
func buildRecipe(t *testing.T, bin, varDir, name string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(name, "build.sh"), bin, varDir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s/build.sh: %v\n%s", name, err, tail(stderr.String(), 4000))
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 || !strings.Contains(fields[len(fields)-1], "@sha256:") {
		t.Fatalf("%s/build.sh printed %q", name, out)
	}
	return fields[len(fields)-1]
}

// exampleRepo makes dst a git repository holding the regular files of src
// in one commit, as the demo does, and returns the commit id.
func exampleRepo(t *testing.T, src, dst string) string {
	t.Helper()
	commit, err := demo.CommitExample(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return commit
}
