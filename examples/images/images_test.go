// Package images holds the image recipes (shell scripts: python/, python-sci/,
// r/, sharing lib.sh) and the test that builds the scientific ones and runs
// them in the real sandbox.
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

// recipe is one scientific image recipe and what must run inside it.
type recipe struct {
	name    string   // directory under examples/images
	args    []string // entrypoint
	want    []string // substrings of its standard output
	pkgWant []string // entries of the recorded package list, by prefix
}

var recipes = []recipe{
	{
		name: "python-sci",
		args: []string{"python3", "-c", `import numpy, scipy, pandas, statsmodels, matplotlib; print(pandas.Timestamp("2020-01-01", tz="Europe/Paris"))
import matplotlib.pyplot as plt
plt.plot([1, 2], [3, 4]); plt.savefig("/work/out/fig.png"); print("backend", matplotlib.get_backend())`},
		want:    []string{"2020-01-01 00:00:00+01:00", "backend agg"},
		pkgWant: []string{"python3-pandas=", "python3-statsmodels=", "python3-matplotlib=", "tzdata="},
	},
	{
		name:    "r",
		args:    []string{"Rscript", "-e", `library(metafor); cat(R.version.string)`},
		want:    []string{"R version 4.2"},
		pkgWant: []string{"r-base-core=", "r-cran-metafor=", "r-cran-hmisc="},
	},
}

// TestScientificImages builds both scientific recipes (the rootfs cached in
// the var directory: the repository's var/, or $DOTLAB_IMAGES_VAR), imports
// them into the store under var/cache, and runs each one's check in the real
// sandbox (runc, the runner's isolation settings). It needs root, debootstrap
// and runc: skipped outside CI when one is missing, a failure in CI. The
// first build takes minutes (README "Images"); later runs reuse the rootfs.
func TestScientificImages(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "chroot", "go")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds two Debian images (-short)")
	}
	varDir := imagesVar(t)
	bin := filepath.Join(t.TempDir(), "dotlab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/dotlab").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	store, err := runner.OpenImageStore(filepath.Join(varDir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	rt := sandbox.Runtime{StateDir: filepath.Join(t.TempDir(), "state")}
	for _, rc := range recipes {
		t.Run(rc.name, func(t *testing.T) {
			start := time.Now()
			var stderr bytes.Buffer
			cmd := exec.Command("bash", filepath.Join(rc.name, "build.sh"), bin, varDir)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s/build.sh: %v\n%s", rc.name, err, tail(stderr.String(), 4000))
			}
			built := time.Since(start)
			fields := strings.Fields(string(out))
			if len(fields) < 2 || !strings.Contains(fields[len(fields)-1], "@sha256:") {
				t.Fatalf("%s/build.sh printed %q", rc.name, out)
			}
			d, err := imagestore.ParseDigest(fields[len(fields)-2])
			if err != nil {
				t.Fatal(err)
			}
			img, err := store.Image(d)
			if err != nil {
				t.Fatal(err)
			}
			if mt := img.Manifest.Layers[0].MediaType; mt != "application/vnd.oci.image.layer.v1.tar+gzip" {
				t.Errorf("layer media type %s, want tar+gzip", mt)
			}
			start = time.Now()
			rootfs, err := store.Rootfs(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			unpacked := time.Since(start)

			// The recorded package list: in the config label and in the image, the same.
			pkgs := img.Packages()
			inImage, err := os.ReadFile(filepath.Join(rootfs, "usr", "share", "dotlab", "packages.txt"))
			if err != nil || strings.Join(pkgs, "\n")+"\n" != string(inImage) {
				t.Errorf("label %s (%d entries) differs from /usr/share/dotlab/packages.txt (%v)", imagestore.PackagesLabel, len(pkgs), err)
			}
			for _, w := range rc.pkgWant {
				found := false
				for _, p := range pkgs {
					found = found || strings.HasPrefix(p, w)
				}
				if !found {
					t.Errorf("package list lacks %s…", w)
				}
			}
			for _, p := range []string{"usr/share/zoneinfo/Europe/Paris", "usr/lib/locale/C.utf8"} {
				if _, err := os.Stat(filepath.Join(rootfs, p)); err != nil {
					t.Errorf("image lacks /%s: %v", p, err)
				}
			}

			var so, se bytes.Buffer
			spec := sandbox.Spec{
				Rootfs: rootfs, CodeDir: t.TempDir(), DataDir: t.TempDir(), Args: rc.args,
				ImageEnv: img.Config.Config.Env,
				Limits:   sandbox.Limits{TimeoutSeconds: 300, MemoryBytes: 1 << 30, CPUs: 1},
			}
			res, err := rt.Run(context.Background(), spec, t.TempDir(), sandbox.IO{Stdout: &so, Stderr: &se})
			if err != nil {
				t.Fatalf("sandbox: %v", err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("%v exited %d\nstdout: %s\nstderr: %s", rc.args, res.ExitCode, so.String(), tail(se.String(), 4000))
			}
			for _, w := range rc.want {
				if !strings.Contains(so.String(), w) {
					t.Errorf("stdout %q lacks %q", so.String(), w)
				}
			}
			size := img.Manifest.Layers[0].Size
			t.Logf("%s: %s, layer %d MB gzip; build.sh %v, unpack %v, run %v; %d packages; stdout %q",
				rc.name, d, size>>20, built.Round(time.Second), unpacked.Round(time.Second), res.Duration.Round(time.Millisecond), len(pkgs), so.String())
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
