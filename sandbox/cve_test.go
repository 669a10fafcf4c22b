package sandbox_test

// Runtime CVE battery (docs/sandbox.md "The runtime's own version"): one
// test per CVE, each running real containers with the host's runc and
// asserting that the defence DotLab relies on holds on this build.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/sandbox"
)

// cveEnv is a busybox rootfs the test may alter (plant symlinks in), plus
// code and data directories.
type cveEnv struct {
	rootfs, code, data string
	rt                 sandbox.Runtime
}

func newCVEEnv(t *testing.T, runtime string) *cveEnv {
	t.Helper()
	testfix.Need(t, true, runtime, "busybox")
	e := &cveEnv{rootfs: testfix.BusyboxRootfs(t), code: t.TempDir(), data: t.TempDir()}
	e.rt = sandbox.Runtime{Name: runtime, StateDir: filepath.Join(t.TempDir(), "state")}
	return e
}

func (e *cveEnv) spec(script string) sandbox.Spec {
	return sandbox.Spec{
		Rootfs: e.rootfs, CodeDir: e.code, DataDir: e.data,
		Args:   []string{"/bin/sh", "-c", script},
		Limits: sandbox.Limits{TimeoutSeconds: 20, MemoryBytes: 128 << 20, Pids: 64, OutputBytes: 16 << 20},
	}
}

// run executes spec and fails the test on a sandbox error or leftovers.
func (e *cveEnv) run(t *testing.T, spec sandbox.Spec) (stdout string, res *sandbox.Result) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := e.rt.Run(context.Background(), spec, t.TempDir(), sandbox.IO{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("sandbox error: %v", err)
	}
	if left := e.rt.Leftovers(res.ID); len(left) > 0 {
		t.Fatalf("run left things behind: %v", left)
	}
	t.Logf("exit=%d dur=%v\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Duration, out.String(), errb.String())
	return out.String(), res
}

// refused runs spec and requires an ErrUnsafeSpec refusal before any
// container existed (the runtime's state directory stays empty).
func (e *cveEnv) refused(t *testing.T, spec sandbox.Spec, wantInMsg ...string) {
	t.Helper()
	_, err := e.rt.Run(context.Background(), spec, t.TempDir(), sandbox.IO{})
	if !errors.Is(err, sandbox.ErrUnsafeSpec) {
		t.Fatalf("want ErrUnsafeSpec, got %v", err)
	}
	for _, w := range wantInMsg {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	entries, _ := os.ReadDir(e.rt.StateDir)
	if len(entries) > 0 {
		t.Fatalf("the runtime saw the bundle: state dir holds %v", entries)
	}
	t.Logf("refused: %v", err)
}

// hostCanary creates a file on the host only and returns its path.
func hostCanary(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	p := filepath.Join(os.TempDir(), "dotlab-canary-"+hex.EncodeToString(b))
	if err := os.WriteFile(p, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return p
}

func readHost(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRuntimeVersionRecorded: the build in use is identified (version,
// commit, spec, dpkg package) and passes the rule; Debian bookworm's build
// carries the CVE-2024-21626 fix and none of the 2025 ones.
func TestRuntimeVersionRecorded(t *testing.T) {
	testfix.Need(t, true, "runc")
	rt := sandbox.Runtime{Name: "runc", StateDir: filepath.Join(t.TempDir(), "state")}
	v, err := rt.CheckVersion(context.Background())
	if err != nil {
		t.Fatalf("CheckVersion: %v", err)
	}
	data, _ := json.Marshal(v)
	t.Logf("%s\n%s", v, data)
	// The run record's type converts directly and serialises the same.
	rec, _ := json.Marshal(dotlab.RuntimeInfo(v))
	if string(rec) != string(data) {
		t.Fatalf("dotlab.RuntimeInfo serialises as %s, sandbox.RuntimeVersion as %s", rec, data)
	}
	if v.Name != "runc" || v.Version == "" || v.Spec == "" {
		t.Fatalf("incomplete version: %+v", v)
	}
	if !v.Has(sandbox.CVE202421626) {
		t.Fatalf("accepted a build without the %s fix: %+v", sandbox.CVE202421626, v)
	}
	if _, err := exec.LookPath("dpkg-query"); err == nil {
		if v.Package == "" || v.PackageVersion == "" {
			t.Fatalf("dpkg is installed but the package is not recorded: %+v", v)
		}
	}
	if v.PackageVersion == "1.1.5+ds1-1+deb12u1" {
		for _, cve := range []string{sandbox.CVE202531133, sandbox.CVE202552565, sandbox.CVE202552881} {
			if v.Has(cve) {
				t.Errorf("bookworm's runc does not carry the %s fix, but Fixes says so", cve)
			}
		}
	}
	if _, err := exec.LookPath("runsc"); err == nil {
		rs := sandbox.Runtime{Name: "runsc"}
		sv, err := rs.CheckVersion(context.Background())
		if err != nil {
			t.Fatalf("runsc CheckVersion: %v", err)
		}
		t.Logf("%s", sv)
		if sv.Name != "runsc" || sv.Version == "" {
			t.Fatalf("incomplete runsc version: %+v", sv)
		}
	}
}

// TestRuntimeBuildRefused: a runc that reports a version without the
// CVE-2024-21626 fix (an executable printing upstream 1.1.11's --version,
// owned by no package) is refused before any bundle is made, with an error
// naming the version and the fix.
func TestRuntimeBuildRefused(t *testing.T) {
	testfix.Need(t, true, "runc", "busybox")
	bin := filepath.Join(t.TempDir(), "runc")
	script := "#!/bin/sh\nprintf 'runc version 1.1.11\\ncommit: v1.1.11-0-g4bccb38c\\nspec: 1.0.2-dev\\ngo: go1.20.12\\n'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bundles := t.TempDir()
	rt := sandbox.Runtime{Name: "runc", Binary: bin, StateDir: filepath.Join(t.TempDir(), "state"), BundleDir: bundles}
	_, err := rt.CheckVersion(context.Background())
	if !errors.Is(err, sandbox.ErrRuntimeRefused) {
		t.Fatalf("CheckVersion: want ErrRuntimeRefused, got %v", err)
	}
	for _, w := range []string{"runc 1.1.11", sandbox.CVE202421626, "1.1.12", "1.1.5+ds1-1+deb12u1"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	e := newCVEEnv(t, "runc")
	_, err = rt.Run(context.Background(), e.spec("true"), t.TempDir(), sandbox.IO{})
	if !errors.Is(err, sandbox.ErrRuntimeRefused) {
		t.Fatalf("Run: want ErrRuntimeRefused, got %v", err)
	}
	if entries, _ := os.ReadDir(bundles); len(entries) > 0 {
		t.Fatalf("a bundle was made for a refused runtime: %v", entries)
	}
}

// fdLine is one entry of busybox `ls -l /proc/self/fd`: the fd number and,
// when readable, the link target (ls's own directory fd has none by the
// time ls reads it).
var fdLine = regexp.MustCompile(`(?m)^l\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)(?: -> (.*))?$`)

// TestCVE202421626 (runc "Leaky Vessels"): (1) the container's process
// holds no descriptor but its stdio and its own — the runtime's fix for the
// leaked host fd is present on this build; (2) a working directory through
// /proc/self/fd/N, or through a symlink in the code or the image that
// points there, is refused before runc sees the bundle; (3) even with our
// check bypassed (our config, cwd /proc/self/fd/N, handed to bare runc),
// this runc build does not start a process in the host's filesystem.
func TestCVE202421626(t *testing.T) {
	e := newCVEEnv(t, "runc")

	out, res := e.run(t, e.spec(`ls -l /proc/self/fd`))
	if res.ExitCode != 0 {
		t.Fatalf("listing fds exited %d", res.ExitCode)
	}
	if res.Runtime.Name != "runc" || !res.Runtime.Has(sandbox.CVE202421626) {
		t.Fatalf("the run does not record a checked runtime build: %+v", res.Runtime)
	}
	fds := map[string]string{}
	for _, m := range fdLine.FindAllStringSubmatch(out, -1) {
		fds[m[1]] = m[2]
	}
	var nums []string
	for n := range fds {
		nums = append(nums, n)
	}
	sort.Strings(nums)
	if strings.Join(nums, ",") != "0,1,2,3" {
		t.Fatalf("container holds fds %v (%v); want only 0,1,2 and ls's own directory fd 3", nums, fds)
	}
	for n, target := range fds {
		ok := strings.HasPrefix(target, "pipe:[") || (n == "3" && (target == "" || strings.HasPrefix(target, "/proc/")))
		if !ok {
			t.Errorf("fd %s -> %s: not a stdio pipe nor ls's own /proc directory", n, target)
		}
	}

	// (2) refused before runc.
	for _, n := range []string{"3", "4", "5", "6", "7", "8", "9"} {
		s := e.spec("pwd")
		s.WorkingDir = "/proc/self/fd/" + n
		e.refused(t, s, "/proc/self/fd/"+n, "kernel file system")
	}
	if err := os.Symlink("/proc/self/fd/7", filepath.Join(e.code, "escape")); err != nil {
		t.Fatal(err)
	}
	s := e.spec("pwd")
	s.WorkingDir = "/work/code/escape"
	e.refused(t, s, "symlink /work/code/escape")
	if err := os.Symlink("/proc/self/fd/7", filepath.Join(e.rootfs, "srv")); err != nil {
		t.Fatal(err)
	}
	s.WorkingDir = "/srv/x"
	e.refused(t, s, "symlink /srv")
	s.WorkingDir = "/work/code/missing"
	e.refused(t, s, "does not exist")

	// (3) the runtime's own check, with ours bypassed.
	canary := hostCanary(t)
	for _, n := range []string{"3", "4", "5", "6", "7", "8", "9"} {
		out, err := bareRunc(t, e, "/proc/self/fd/"+n, `test -e ../../../..`+canary+` && echo ESCAPED; test -e `+canary+` && echo ESCAPED; echo started`)
		t.Logf("cwd /proc/self/fd/%s: err=%v\n%s", n, err, out)
		if strings.Contains(out, "ESCAPED") {
			t.Fatalf("cwd /proc/self/fd/%s reached the host file system: this runc lacks the %s fix", n, sandbox.CVE202421626)
		}
		if err == nil || strings.Contains(out, "started") {
			t.Fatalf("runc started a process with cwd /proc/self/fd/%s (err=%v)", n, err)
		}
	}
}

// bareRunc runs DotLab's config for e with process.cwd replaced, straight
// through `runc run` (no checkBundle), and removes what it made.
func bareRunc(t *testing.T, e *cveEnv, cwd, script string) (string, error) {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	id := "dotlab-cvetest-" + hex.EncodeToString(b)
	bundle := t.TempDir()
	outHost := t.TempDir()
	cfg := sandbox.Config(e.spec(script), outHost, id, false)
	cfg.Process.Cwd = cwd
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runc", "--root", state, "run", "--bundle", bundle, id)
	devNull, _ := os.Open(os.DevNull)
	defer devNull.Close()
	cmd.Stdin = devNull
	outb, err := cmd.CombinedOutput()
	exec.Command("runc", "--root", state, "delete", "--force", id).Run()
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/dotlab/" + id)
	if d := "/sys/fs/cgroup/dotlab/" + id; exists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		os.Remove(filepath.Join(d, "ctr"))
		os.Remove(d)
	}
	return string(outb), err
}

// TestCVE202531133 (maskedPaths through a replaced /dev/null): an image
// that plants /dev/null as a symlink to /proc/sys/kernel/core_pattern does
// not get it: /dev is a fresh tmpfs in which runc makes the real device,
// masked files are that device, and the process (uid 1590000, no
// capabilities) cannot write the kernel knobs the attack targets. An image
// whose /dev itself is a symlink is refused before runc.
func TestCVE202531133(t *testing.T) {
	e := newCVEEnv(t, "runc")
	os.MkdirAll(filepath.Join(e.rootfs, "dev"), 0o755)
	if err := os.Symlink("/proc/sys/kernel/core_pattern", filepath.Join(e.rootfs, "dev", "null")); err != nil {
		t.Fatal(err)
	}
	before := readHost(t, "/proc/sys/kernel/core_pattern")
	// The masked files this kernel has (kcore, sched_debug … are absent on some).
	var masked []string
	for _, p := range sandbox.Config(e.spec("true"), t.TempDir(), "x", false).Linux.MaskedPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			masked = append(masked, p)
		}
	}
	if len(masked) == 0 {
		t.Fatal("no masked file exists on this kernel to check")
	}
	script := "stat -c 'null %F %t:%T' /dev/null\n"
	for _, p := range masked {
		script += "stat -c '" + p + " %F %t:%T %s' " + p + "\n"
	}
	script += `echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern 2>/dev/null && echo WROTE-core_pattern
echo x > /dev/null && echo devnull-ok
`
	out, res := e.run(t, e.spec(script))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	wants := []string{"null character special file 1:3", "devnull-ok"}
	for _, p := range masked {
		wants = append(wants, p+" character special file 1:3 0")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "WROTE") {
		t.Errorf("the analysis wrote /proc/sys/kernel/core_pattern")
	}
	if after := readHost(t, "/proc/sys/kernel/core_pattern"); after != before {
		t.Fatalf("host core_pattern changed: %q -> %q", before, after)
	}

	e2 := newCVEEnv(t, "runc")
	os.RemoveAll(filepath.Join(e2.rootfs, "dev"))
	if err := os.Symlink("/tmp", filepath.Join(e2.rootfs, "dev")); err != nil {
		t.Fatal(err)
	}
	e2.refused(t, e2.spec("true"), "/dev as a symlink")
}

// TestCVE202552565 (/dev/console bind-mount): DotLab never asks for a
// terminal, so runc makes no /dev/console mount at all; a /dev/console
// planted by the image is hidden by the fresh /dev; no pty is allocated;
// and the process cannot write /proc/sysrq-trigger, the file the attack
// makes writable.
func TestCVE202552565(t *testing.T) {
	e := newCVEEnv(t, "runc")
	os.MkdirAll(filepath.Join(e.rootfs, "dev", "pts"), 0o755)
	if err := os.Symlink("/proc/sysrq-trigger", filepath.Join(e.rootfs, "dev", "console")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/sysrq-trigger", filepath.Join(e.rootfs, "dev", "pts", "0")); err != nil {
		t.Fatal(err)
	}
	out, res := e.run(t, e.spec(`
if [ -e /dev/console ] || [ -L /dev/console ]; then echo CONSOLE-PRESENT; else echo no-console; fi
echo "pts: $(ls /dev/pts | tr '\n' ' ')"
grep -c ' /dev/console ' /proc/self/mountinfo
echo h > /proc/sysrq-trigger 2>/dev/null && echo WROTE-sysrq
echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern 2>/dev/null && echo WROTE-core_pattern
[ -t 0 ] && echo STDIN-IS-TTY
[ -t 1 ] && echo STDOUT-IS-TTY
echo end
`))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	for _, want := range []string{"no-console", "pts: ptmx \n", "0\n", "end"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, bad := range []string{"CONSOLE-PRESENT", "WROTE", "IS-TTY"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q", bad)
		}
	}
}

// TestCVE202552881 (runc's /proc writes redirected through racing shared
// mounts): no mount of the container is in a shared peer group (so no
// other mount namespace, e.g. another container, can change what runc
// sees while it sets up), the config asks for none of the procfs writes
// the advisory names (LSM labels, sysctls — checked by checkBundle), the
// kernel knobs a redirected write would target are not writable by the
// process, and an image whose /proc (or /sys, /tmp, /work) is a symlink is
// refused before runc.
func TestCVE202552881(t *testing.T) {
	e := newCVEEnv(t, "runc")
	before := readHost(t, "/proc/sys/kernel/core_pattern")
	out, res := e.run(t, e.spec(`
grep -c 'shared:' /proc/self/mountinfo
cat /proc/self/attr/current 2>/dev/null; echo
echo x > /proc/sys/kernel/core_pattern 2>/dev/null && echo WROTE-core_pattern
echo x > /proc/sys/kernel/hostname 2>/dev/null && echo WROTE-hostname
echo h > /proc/sysrq-trigger 2>/dev/null && echo WROTE-sysrq
echo end
`))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	if !strings.HasPrefix(out, "0\n") {
		t.Errorf("some container mount is shared (first line should be 0): %q", out)
	}
	if strings.Contains(out, "WROTE") || !strings.Contains(out, "end") {
		t.Errorf("a kernel knob was written or the script did not finish: %q", out)
	}
	if after := readHost(t, "/proc/sys/kernel/core_pattern"); after != before {
		t.Fatalf("host core_pattern changed: %q -> %q", before, after)
	}
	for _, p := range []string{"proc", "sys", "tmp", "work"} {
		e2 := newCVEEnv(t, "runc")
		os.RemoveAll(filepath.Join(e2.rootfs, p))
		if err := os.Symlink("/proc/self/fd/7", filepath.Join(e2.rootfs, p)); err != nil {
			t.Fatal(err)
		}
		e2.refused(t, e2.spec("true"), "/"+p+" as a symlink")
	}
}

// TestStdinDevNull: the analysis's stdin gives end-of-file at once. runc
// (terminal false, foreground) connects fd 0 to a pipe it fills from its
// own stdin, which DotLab opens on /dev/null, so the pipe is closed before
// the analysis reads; the analysis cannot write to it either.
//
// Under runsc (when installed) fd 0 is runsc's own stdin, the host's
// /dev/null, donated to the sandbox (gVisor shows it as "host:[N]").
func TestStdinDevNull(t *testing.T) {
	script := `
echo "fd0=$(readlink /proc/self/fd/0)"
echo "bytes=$(cat | wc -c)"
echo end
`
	e := newCVEEnv(t, "runc")
	start := time.Now()
	out, res := e.run(t, e.spec(`echo x >&0 2>/dev/null && echo WROTE-stdin`+script))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("reading stdin took %v: it did not end at once", d)
	}
	if !regexp.MustCompile(`fd0=pipe:\[\d+\]`).MatchString(out) || !strings.Contains(out, "bytes=0\n") || strings.Contains(out, "WROTE") {
		t.Fatalf("stdin is not an empty, read-only stream at EOF: %q", out)
	}
	if _, err := exec.LookPath("runsc"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("runsc not installed")
	}
	e = newCVEEnv(t, "runsc")
	out, res = e.run(t, e.spec(script))
	if res.ExitCode != 0 || !regexp.MustCompile(`fd0=host:\[\d+\]\n`).MatchString(out) || !strings.Contains(out, "bytes=0\n") {
		t.Fatalf("runsc: stdin is not /dev/null at EOF (exit %d): %q", res.ExitCode, out)
	}
}
