package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagebuild"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/netpolicy"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/internal/testing/testimage"
)

// BenchmarkAptLayer adds one Debian package (apt.txt: python3-sklearn, from
// the live mirror) to the scientific Python image, two ways side by side
// (bench/README.md "Environments"):
//
//   - layer-cold, layer-warm: `dotlab image build --base` (imagebuild.BuildPackage): the
//     store image handed to buildah, apt-get in one build step through the
//     egress proxy, one new layer over the base's layers as they are. Each
//     iteration starts from fresh buildah storage and no plan cache (the
//     cold path: a second build of the same plan is a cache hit, ~0 s);
//   - recipe: what it took before, a copy of examples/images/python-sci
//     with python3-sklearn added to PACKAGES: debootstrap and apt from
//     nothing, then the pack.
//
// Root, buildah, runc, debootstrap and the Debian mirror.
func BenchmarkAptLayer(b *testing.B) {
	testfix.Need(b, true, "buildah", "runc", "debootstrap")
	if os.Getenv("DOTLAB_BENCH_ENV") == "" {
		b.Skip("set DOTLAB_BENCH_ENV=1: minutes of both cores and the Debian mirror (bench/run.sh env)")
	}
	store, err := imagestore.Open(filepath.Join(b.TempDir(), "images"))
	if err != nil {
		b.Fatal(err)
	}
	base := testimage.Example(b, "python-sci", store)
	pkg := b.TempDir()
	os.WriteFile(filepath.Join(pkg, "apt.txt"), []byte("python3-sklearn\n"), 0o644)
	build := func(b *testing.B, workDir string) {
		os.RemoveAll(filepath.Join(store.Dir(), "builds"))
		o := imagebuild.Options{Store: store, Ref: "bench/sci-sklearn", WorkDir: workDir, Log: phaseLog{b},
			Rules: netpolicy.Rules{AllowPrivate: true}} // the mirror here resolves to a reserved address
		res, err := imagebuild.BuildPackage(context.Background(), pkg, base, imagebuild.Repositories{}, o)
		if err != nil {
			b.Fatal(err)
		}
		if res.Layers != 1 {
			b.Fatalf("%d new layers", res.Layers)
		}
	}
	// cold: fresh buildah storage, so the base is imported into it first.
	b.Run("layer-cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			build(b, filepath.Join(b.TempDir(), "buildah"))
		}
	})
	// warm: the base already in buildah's storage (STORE/buildah by default,
	// kept between builds), as for every build after the first on a base.
	b.Run("layer-warm", func(b *testing.B) {
		work := filepath.Join(b.TempDir(), "buildah")
		build(b, work)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			build(b, work)
		}
	})
	b.Run("recipe", func(b *testing.B) {
		bin := filepath.Join(b.TempDir(), "dotlab")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/dotlab").CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
		recipe, err := os.ReadFile("../examples/images/python-sci/build.sh")
		if err != nil {
			b.Fatal(err)
		}
		text := strings.Replace(string(recipe), `PACKAGES="python3 `, `PACKAGES="python3-sklearn python3 `, 1)
		lib, _ := filepath.Abs("../examples/images/lib.sh")
		for i := 0; i < b.N; i++ {
			dir := b.TempDir()
			os.MkdirAll(filepath.Join(dir, "python-sklearn"), 0o755)
			os.Symlink(lib, filepath.Join(dir, "lib.sh"))
			os.WriteFile(filepath.Join(dir, "python-sklearn", "build.sh"), []byte(text), 0o755)
			if out, err := exec.Command("bash", filepath.Join(dir, "python-sklearn", "build.sh"), bin, filepath.Join(dir, "var")).CombinedOutput(); err != nil {
				b.Fatalf("recipe: %v\n%s", err, out[max(0, len(out)-4000):])
			}
		}
	})
}

// phaseLog passes on imagebuild's phase lines only (b.Log).
type phaseLog struct{ b *testing.B }

func (p phaseLog) Write(data []byte) (int, error) {
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "dotlab image build:") {
			p.b.Log(line)
		}
	}
	return len(data), nil
}
