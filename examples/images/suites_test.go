package images

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
)

// buildRecipe runs examples/images/RECIPE/build.sh with args into varDir and
// returns the image, resolved in varDir's store, and the build's time.
func buildSuiteRecipe(t *testing.T, bin, varDir, recipe string, args ...string) (*imagestore.Store, *imagestore.Image, time.Duration) {
	t.Helper()
	start := time.Now()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{filepath.Join(recipe, "build.sh")}, append(args, bin, varDir)...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s/build.sh %v: %v\n%s", recipe, args, err, tail(stderr.String(), 4000))
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		t.Fatalf("%s/build.sh printed %q", recipe, out)
	}
	store, err := runner.OpenImageStore(filepath.Join(varDir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := imagestore.ParseDigest(f[len(f)-2])
	if err != nil {
		t.Fatal(err)
	}
	img, err := store.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	return store, img, time.Since(start)
}

// runImage runs args in img with the real sandbox; code holds the files
// given (name → content) and is the working directory.
func runImage(t *testing.T, store *imagestore.Store, img *imagestore.Image, code map[string]string, args ...string) string {
	t.Helper()
	rootfs, err := store.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	codeDir := t.TempDir()
	for name, text := range code {
		os.WriteFile(filepath.Join(codeDir, name), []byte(text), 0o644)
	}
	var so, se bytes.Buffer
	spec := sandbox.Spec{Rootfs: rootfs, CodeDir: codeDir, DataDir: t.TempDir(), Args: args, ImageEnv: img.Config.Config.Env,
		Limits: sandbox.Limits{TimeoutSeconds: 300, MemoryBytes: 2 << 30, CPUs: 1}}
	res, err := sandbox.Runtime{StateDir: filepath.Join(t.TempDir(), "state")}.Run(context.Background(), spec, t.TempDir(), sandbox.IO{Stdout: &so, Stderr: &se})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v: %v, exit %d\n%s", args, err, res.ExitCode, tail(se.String(), 4000))
	}
	return so.String()
}

// TestSuitesOneSmallBuildEach shows the two suites besides bookworm with
// the smallest recipe (python: python3-minimal and its standard library):
// bullseye gives Python 3.9 and trixie Python 3.13, named
// dotlab.example/python-SUITE and cached apart from the bookworm image.
func TestSuitesOneSmallBuildEach(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "chroot", "go")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds two small Debian images (-short)")
	}
	varDir, bin := imagesVar(t), dotlabBinary(t)
	for suite, want := range map[string]string{"bullseye": "3.9", "trixie": "3.13"} {
		t.Run(suite, func(t *testing.T) {
			store, img, took := buildSuiteRecipe(t, bin, varDir, "python", "--suite", suite)
			if _, err := os.Stat(filepath.Join(varDir, "images", "python-"+suite+"-rootfs")); err != nil {
				t.Errorf("rootfs not cached apart: %v", err)
			}
			out := runImage(t, store, img, nil, "python3", "-c", "import sys, json, statistics; print('%d.%d' % sys.version_info[:2])")
			if strings.TrimSpace(out) != want {
				t.Fatalf("python3 in %s: %q, want %s", suite, out, want)
			}
			t.Logf("%s: %s in %s", suite, img.Digest, took.Round(time.Second))
		})
	}
}

// notebook is a two-cell notebook (nbformat 4) whose outputs nbconvert fills in.
const notebook = `{"cells":[{"cell_type":"code","execution_count":null,"id":"a","metadata":{},"outputs":[],
"source":["import numpy, pandas\n","total = int(numpy.sum([1, 2]))"]},
{"cell_type":"code","execution_count":null,"id":"b","metadata":{},"outputs":[],"source":["print(total)"]}],
"metadata":{"kernelspec":{"display_name":"Python 3","language":"python","name":"python3"}},"nbformat":4,"nbformat_minor":5}`

// TestNotebookImage builds the python-notebook recipe (one layer of
// nbconvert and ipykernel over python-sci, from the mirror) and executes a
// notebook with it in the sandbox, as a notebook package's entrypoint does.
func TestNotebookImage(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "chroot", "go", "buildah")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the scientific Python image and a layer over it (-short)")
	}
	varDir, bin := imagesVar(t), dotlabBinary(t)
	store, img, took := buildSuiteRecipe(t, bin, varDir, "python-notebook")
	out := runImage(t, store, img, map[string]string{"analysis.ipynb": notebook},
		"sh", "-c", "jupyter-nbconvert --to notebook --execute analysis.ipynb --output-dir /work/out >&2 && cat /work/out/analysis.ipynb")
	if !strings.Contains(out, `"text": [`) || !strings.Contains(out, `"3\n"`) {
		t.Fatalf("executed notebook lacks the printed total:\n%s", tail(out, 2000))
	}
	if !strings.Contains(strings.Join(img.Packages(), "\n"), "python3-nbconvert=") {
		t.Error("the image's package label does not list python3-nbconvert")
	}
	t.Logf("python-notebook: %s, %d layers, built in %s", img.Digest, len(img.Manifest.Layers), took.Round(time.Second))
}
