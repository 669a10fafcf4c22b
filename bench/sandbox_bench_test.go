// Package bench measures the runner side against its goals (docs/sandbox.md
// "Benchmarks"): the full dotlab sandbox path for `true` against a bare
// `runc run` of a hand-written bundle and `podman run --network=none`, on the
// same busybox image, side by side in one run; and a whole `dotlab rerun` of a
// trivial claim. Run with bench/run.sh (root, runc, podman, busybox-static).
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/internal/testing/testimage"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

type setup struct {
	cache  string
	store  *imagestore.Store
	digest string
	rootfs string
}

func prepare(b *testing.B) setup {
	b.Helper()
	testfix.Need(b, true, "runc", "busybox")
	// podman names an image pulled from an OCI layout after its path, which
	// must then be lowercase.
	cache, err := os.MkdirTemp("", "dotlabbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(cache) })
	store, err := imagestore.Open(filepath.Join(cache, "images"))
	if err != nil {
		b.Fatal(err)
	}
	d, rootfs := testimage.Busybox(b, store, "localhost/bench/busybox")
	return setup{cache: cache, store: store, digest: d, rootfs: rootfs}
}

// bareBundle is a hand-written bundle as `runc spec` makes it (rootless
// tweaks only: no terminal, rlimits below this machine's hard limits,
// cgroupfs path), on the same read-only rootfs.
func bareBundle(b *testing.B, rootfs string) string {
	b.Helper()
	dir := b.TempDir()
	cfg := specs.Spec{
		Version: "1.0.2",
		Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 1000}, Args: []string{"/bin/true"}, Cwd: "/",
			Env:             []string{"PATH=/bin"},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: "bare",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/dotlab-bench/bare",
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
		},
	}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// runc removed each run's leaf cgroup; the shared parent is ours to remove.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/dotlab-bench")
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	return dir
}

func runCmd(b *testing.B, name string, args ...string) {
	b.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// BenchmarkTrue runs `true` on the same image four ways, interleaved within
// each iteration so that machine load affects all alike: the full dotlab
// sandbox path (sandbox.Runtime.Run: bundle, out tmpfs, config.json with
// seccomp and limits, runc run, OOM watch, cleanup, output walk); bare `runc
// run` of dotlab's own config.json written once by hand (same isolation,
// none of dotlab's orchestration); bare `runc run` of a minimal hand-written
// bundle (runc spec style: no seccomp, no cgroup limits, 2 mounts); and
// `podman run --network=none` (runc, cgroupfs). Reports ms per run of each
// and the ratios against the goals.
func BenchmarkTrue(b *testing.B) {
	s := prepare(b)
	rt := probedRuntime(b)
	code, data := b.TempDir(), b.TempDir()
	spec := sandbox.Spec{Rootfs: s.rootfs, CodeDir: code, DataDir: data, Args: []string{"true"}, ImageEnv: []string{imagestore.DefaultPath}}

	sameDir := b.TempDir()
	sameOut := b.TempDir()
	os.Chmod(sameOut, 0o777)
	cfgJSON, _ := json.Marshal(sandbox.Config(spec, sameOut, "same", false))
	os.WriteFile(filepath.Join(sameDir, "config.json"), cfgJSON, 0o644)
	b.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/dotlab/same")
		for _, d := range dirs {
			os.Remove(filepath.Join(d, "ctr"))
			os.Remove(d)
		}
	})
	minimal := bareBundle(b, s.rootfs)
	state := filepath.Join(b.TempDir(), "bare-state")

	podmanID := ""
	pod := []string{"--runtime=runc", "--cgroup-manager=cgroupfs"}
	if _, err := exec.LookPath("podman"); err == nil {
		out, err := exec.Command("podman", append(pod, "pull", "-q", "oci:"+filepath.Join(s.cache, "images", "oci")+":localhost/bench/busybox")...).Output()
		if err != nil {
			b.Fatalf("podman pull: %v", err)
		}
		podmanID = strings.TrimSpace(string(out))
	}
	var tDotlab, tSame, tMinimal, tPodman time.Duration
	timeIt := func(acc *time.Duration, f func()) {
		start := time.Now()
		f()
		*acc += time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		timeIt(&tDotlab, func() {
			res, err := rt.Run(context.Background(), spec, b.TempDir(), sandbox.IO{})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%v %+v", err, res)
			}
		})
		timeIt(&tSame, func() { runCmd(b, "runc", "--root", state, "run", "--bundle", sameDir, fmt.Sprintf("same-%d", i)) })
		timeIt(&tMinimal, func() { runCmd(b, "runc", "--root", state, "run", "--bundle", minimal, fmt.Sprintf("min-%d", i)) })
		if podmanID != "" {
			timeIt(&tPodman, func() {
				runCmd(b, "podman", append(pod, "run", "--rm", "--pull=never", "--network=none", "--read-only",
					"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", podmanID, "true")...)
			})
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(tDotlab), "dotlab-ms")
	b.ReportMetric(ms(tSame), "runc-same-config-ms")
	b.ReportMetric(ms(tMinimal), "runc-minimal-ms")
	b.ReportMetric(ms(tDotlab)/ms(tSame), "x-runc-same")
	b.ReportMetric(ms(tDotlab)/ms(tMinimal), "x-runc-minimal")
	if podmanID != "" {
		b.ReportMetric(ms(tPodman), "podman-ms")
		b.ReportMetric(ms(tDotlab)/ms(tPodman), "x-podman")
	}
}

// BenchmarkRerunTrivial is a whole `dotlab rerun` of a trivial claim (one
// tiny file:// dataset, a local git repository, results.json echoed),
// everything already cached, against a bare runc run of `true`.
func BenchmarkRerunTrivial(b *testing.B) {
	s := prepare(b)
	dataPath := filepath.Join(b.TempDir(), "d.csv")
	os.WriteFile(dataPath, []byte("x\n1\n"), 0o644)
	repoDir := b.TempDir()
	r, _ := git.PlainInit(repoDir, false)
	os.WriteFile(filepath.Join(repoDir, "run.sh"), []byte(`echo '{"v": 1}' > "$DOTLAB_OUT_DIR/results.json"`), 0o644)
	wt, _ := r.Worktree()
	wt.Add("run.sh")
	h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "b", Email: "b@example.org", When: time.Unix(1e9, 0)}})
	if err != nil {
		b.Fatal(err)
	}
	m := &dotlab.Manifest{
		SpecVersion: "0.1", Title: "trivial", Source: dotlab.Source{Citation: "bench"},
		Datasets:    []dotlab.Dataset{{Name: "d", URL: "file://" + dataPath, SHA256: "4bb2b7a2c4d5ef9dbd4a3dfbb1e31f5b7a6c7d59f19a8b06ed6c2cb8e9c2e0b1"}},
		Code:        dotlab.Code{Repository: repoDir, Commit: h.String()},
		Environment: dotlab.Environment{Image: "localhost/bench/busybox@" + s.digest},
		Entrypoint:  []string{"sh", "run.sh"},
		Targets:     []dotlab.Target{{Name: "v", Value: "1", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0"}}},
	}
	data, _ := os.ReadFile(dataPath)
	m.Datasets[0].SHA256 = sha256Hex(data)
	run, err := runner.New(s.cache, sandbox.Runtime{StateDir: filepath.Join(b.TempDir(), "state")}, runner.LocalPolicy("/"), dotlab.SystemClock{})
	if err != nil {
		b.Fatal(err)
	}
	bundle := bareBundle(b, s.rootfs)
	state := filepath.Join(b.TempDir(), "state")
	var tRerun, tBare time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		rec, err := run.Rerun(context.Background(), m, b.TempDir())
		if err != nil || rec.Body.Outcome != dotlab.OutcomeReproduced {
			b.Fatalf("%v %+v", err, rec)
		}
		tRerun += time.Since(start)
		start = time.Now()
		runCmd(b, "runc", "--root", state, "run", "--bundle", bundle, fmt.Sprintf("bare-%d", i))
		tBare += time.Since(start)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(tRerun), "rerun-ms")
	b.ReportMetric(ms(tBare), "runc-minimal-ms")
	b.ReportMetric(ms(tRerun)/ms(tBare), "x-runc-minimal")
}

// probedRuntime is a sandbox runtime whose version was probed once, as the
// runner does before its first run (runner.Rerun), so no timed Run probes it.
func probedRuntime(b *testing.B) sandbox.Runtime {
	b.Helper()
	rt := sandbox.Runtime{StateDir: filepath.Join(b.TempDir(), "state")}
	if _, err := rt.CheckVersion(context.Background()); err != nil {
		b.Fatal(err)
	}
	return rt
}
