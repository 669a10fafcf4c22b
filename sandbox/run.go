package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dotlab/dotlab"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Runtime names an OCI runtime binary and how to call it.
type Runtime struct {
	// Name is "runc" (default) or "runsc" (gVisor, always with the ptrace
	// platform and its own loopback-only network stack).
	Name string
	// Binary is the executable; empty means Name looked up in PATH, /usr/sbin, /usr/bin.
	Binary string
	// StateDir is the runtime's --root (its container state); empty means
	// /run/dotlab/<name>. Keeping it apart from other users of runc lets
	// cleanup checks see only DotLab's containers.
	StateDir string
	// BundleDir is where per-run bundles are made; empty means os.TempDir().
	BundleDir string
	// Clock measures Result.Duration; nil means the wall clock.
	Clock dotlab.Clock

	// ResponderBinary is the executable re-run (with ResponderArg) as the
	// download responder of a run with Spec.Downloads; empty means this
	// process's own binary.
	ResponderBinary string

	// VersionCache, when set, is a file where CheckVersion keeps its result
	// between processes, keyed by the runtime binary's path, device, inode,
	// size and mtime (sandbox/versioncache.go): a rerun then runs neither
	// `NAME --version` nor dpkg-query while the binary is unchanged. The
	// runner sets it to <cache>/runtime-version.json.
	VersionCache string

	// checked is the last CheckVersion result for this value's binary.
	checked *checkedVersion
	// hostNetwork: runsc uses the network namespace it is given (the
	// responder's, loopback only) rather than its own (responder.go).
	hostNetwork bool
}

func (r Runtime) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

// Result is what a run produced.
type Result struct {
	// ID is the container id ("dotlab-<hex>").
	ID string
	// ExitCode is the entrypoint's exit status (128+signal when killed).
	ExitCode int
	// TimedOut is true when the timeout fired and the container was killed.
	TimedOut bool
	// OOMKilled is true when the memory cgroup killed a process.
	OOMKilled bool
	// Duration is the wall time from `runc run` to its exit.
	Duration time.Duration
	// Files are the regular files found in /work/out, copied to the caller's
	// out directory (sorted by path).
	Files []OutFile
	// Rejected lists paths in /work/out that are not regular files or
	// directories (symlinks, FIFOs, sockets); they were not copied or followed.
	Rejected []Rejected
	// OutputFull is true when /work/out reached its size or file cap.
	OutputFull bool
	// Runtime is the runtime build that ran the container, as checked by
	// CheckVersion before the run (record it as the run's
	// environment.runtime: dotlab.RuntimeInfo(res.Runtime)).
	Runtime RuntimeVersion
	// Kept holds the Spec.Keep files of the scratch copy, by path.
	Kept map[string]KeptFile
	// Downloads lists the requests the download responder answered or
	// refused, in order (runs with Spec.Downloads only).
	Downloads []ResponderEvent
	// OverLimit, when not empty, says which copy-out limit /work/out broke
	// (apparent bytes, files, depth; see Limits and docs/sandbox.md
	// "After the run"): nothing was copied to the host and the run is a
	// spec_issue.
	OverLimit string
}

// Rejected is one entry of /work/out that was refused.
type Rejected struct {
	Path string `json:"path"`
	Type string `json:"type"`
}

// OutFile is one output: path relative to /work/out (slash-separated), size in bytes, sha256 hex.
type OutFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// IO carries the analysis's standard output and error. Its standard input
// is never the caller's: the runtime is started with /dev/null as its
// stdin. runc (terminal false, not detached) hands the container a pipe
// that it fills from its own stdin and closes at once, so the analysis
// reads end-of-file immediately and fd 0 shows as "pipe:[N]"; runsc donates
// its /dev/null to the sandbox, where fd 0 shows as "host:[N]" and also
// reads end-of-file.
type IO struct {
	Stdout, Stderr io.Writer
}

func (r Runtime) name() string {
	if r.Name == "" {
		return "runc"
	}
	return r.Name
}

func (r Runtime) binary() (string, error) {
	if r.Binary != "" {
		return r.Binary, nil
	}
	if p, err := exec.LookPath(r.name()); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(d, r.name())
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("OCI runtime %q not found: install the Debian package %s", r.name(), r.name())
}

func (r Runtime) stateDir() string {
	if r.StateDir != "" {
		return r.StateDir
	}
	return filepath.Join("/run/dotlab", r.name())
}

// globalArgs are the runtime flags placed before the subcommand.
func (r Runtime) globalArgs() []string {
	args := []string{"--root", r.stateDir()}
	if r.name() == "runsc" {
		network := "--network=none"
		if r.hostNetwork {
			network = "--network=host"
		}
		args = append(args, "--platform=ptrace", network)
	}
	return args
}

func (r Runtime) command(ctx context.Context, args ...string) (*exec.Cmd, error) {
	bin, err := r.binary()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, append(r.globalArgs(), args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd, nil
}

// Check reports whether the runtime can be used here: its binary exists and
// the caller is root (runc without a user namespace needs root).
func (r Runtime) Check() error {
	if _, err := r.binary(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("the sandbox needs root (runc creates namespaces and cgroups); run dotlab rerun as root")
	}
	switch r.name() {
	case "runc", "runsc":
		return nil
	}
	return fmt.Errorf("runtime %q: want runc or runsc", r.name())
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "dotlab-" + hex.EncodeToString(b)
}

// Run executes spec in a fresh container and copies the regular files of
// /work/out into outDir (which must exist). It returns an error only when the
// sandbox itself failed (runtime missing, bundle, mounts, cleanup); whatever
// the analysis did (non-zero exit, timeout, OOM, symlinks in out) is in Result.
//
// Order: bundle dir → size-capped tmpfs for out (host mount, nosuid, nodev,
// noexec) and, for a scratch run, the scratch overlay → config.json → `runtime run` with a timer that runs `runtime
// kill ID KILL` → OOM read from the memory cgroup → `runtime delete -f ID`
// if the runtime still knows the container → cgroups removed → lstat walk of out (symlinks and other non-regular entries are
// rejected, never followed) → copy + sha256 of regular files opened with
// O_NOFOLLOW → the Spec.Keep files read from the scratch copy → unmount
// and remove the bundle. Cleanup runs on every path.
func (r Runtime) Run(ctx context.Context, spec Spec, outDir string, stdio IO) (res *Result, err error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	// Refuses a runtime build without the CVE-2024-21626 fix; probes only
	// when this value has not checked the current binary yet.
	version, err := r.CheckVersion(ctx)
	if err != nil {
		return nil, err
	}
	if len(spec.Args) == 0 {
		return nil, errors.New("sandbox: empty entrypoint")
	}
	limits := spec.Limits.WithDefaults()
	spec.Limits = limits
	id := newID()
	res = &Result{ID: id, Runtime: version}
	bundleParent := r.BundleDir
	if bundleParent == "" {
		bundleParent = os.TempDir()
	}
	// Clean up after runs whose dotlab process died without doing so.
	r.Reap()
	bundle, err := os.MkdirTemp(bundleParent, id+"-")
	if err != nil {
		return nil, err
	}
	release, err := r.record(id, bundle)
	if err != nil {
		os.RemoveAll(bundle)
		return nil, fmt.Errorf("sandbox: record run owner: %w", err)
	}
	if err := os.Chmod(bundle, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		cerr := cleanupBundle(bundle)
		if cerr != nil && err == nil {
			err = cerr
		}
		if cerr == nil {
			release() // everything is gone: the record can go too
		}
	}()
	outMnt, scratchMnt, err := mountWork(bundle, spec, limits)
	if err != nil {
		return nil, err
	}
	rr, err := r.responder(bundle, spec)
	if err != nil {
		return nil, err
	}
	defer rr.stop()
	r.hostNetwork = rr != nil
	cfg := ociConfig(spec, outMnt, scratchMnt, cgroupsPathFor(id), r.name() == "runsc")
	rr.configure(cfg, bundle)
	if err := writeConfig(bundle, cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.stateDir(), 0o700); err != nil {
		return nil, err
	}

	if err := r.execute(ctx, id, bundle, limits, stdio, res); err != nil {
		return nil, err
	}
	res.Downloads = rr.stop()
	if err := collectOut(outMnt, outDir, limits, res); err != nil {
		return nil, err
	}
	if res.Kept, err = readKept(bundle, spec.Keep); err != nil {
		return nil, err
	}
	return res, nil
}

// writeConfig checks cfg (checkBundle) and writes it as the bundle's config.json.
func writeConfig(bundle string, cfg *specs.Spec) error {
	if err := checkBundle(cfg); err != nil {
		return err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644)
}

// execute runs the container to completion (or kill) and makes sure it is gone.
//
// The container's cgroup is <parent>/ctr with parent = /dotlab/<id>: `runc
// run` removes its own leaf when the container exits, the parent keeps the
// memory controller's OOM-kill count (hierarchical on cgroup v1 and v2), and
// this function reads it and removes the parent. So the common path costs a
// single runtime invocation; only a timeout or cancellation adds `kill` and
// `delete`.
func (r Runtime) execute(ctx context.Context, id, bundle string, limits Limits, stdio IO, res *Result) (err error) {
	// runc run must not be killed by context cancellation: a signal to runc
	// leaves the container running (docs/sandbox.md "Isolation settings",
	// timeout). Cancellation and the timeout go through kill + delete below
	// instead.
	cmd, err := r.command(context.WithoutCancel(ctx), "run", "--bundle", bundle, id)
	if err != nil {
		return err
	}
	cmd.Dir = bundle
	// The runtime's stdin is /dev/null itself (see IO for what the
	// analysis sees); never a descriptor of this process.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("sandbox: open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()
	cmd.Stdin = devNull
	cmd.Stdout = orDiscard(stdio.Stdout)
	cmd.Stderr = orDiscard(stdio.Stderr)
	cmd.WaitDelay = 10 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	defer func() {
		if cerr := r.cleanup(id); cerr != nil && err == nil {
			err = cerr
		}
	}()
	oom, err := memoryParent(id, limits.MemoryBytes)
	if err != nil {
		return err
	}
	defer oom.close()
	start := r.now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: start %s: %w", r.name(), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(time.Duration(limits.TimeoutSeconds) * time.Second)
	defer timer.Stop()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		res.TimedOut = true
		r.kill(id)
		waitErr = waitBounded(cmd, done)
	case <-ctx.Done():
		r.kill(id)
		waitBounded(cmd, done)
		return ctx.Err()
	}
	res.Duration = r.now().Sub(start)
	res.ExitCode = exitCode(waitErr)
	if res.ExitCode < 0 {
		return fmt.Errorf("sandbox: %s run: %w", r.name(), waitErr)
	}
	res.OOMKilled = oom.fired()
	return nil
}

// waitBounded waits for `runtime run` to return after a kill; if it has not
// within 30 s, its process group is killed (cleanup then deletes the container).
func waitBounded(cmd *exec.Cmd, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return <-done
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// exitCode maps cmd.Wait's error to an exit status; -1 when runc itself could not be run.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// kill sends SIGKILL to every process of the container (the init's death
// empties the pid namespace); delete in cleanup then removes what is left.
func (r Runtime) kill(id string) {
	for i := 0; i < 3; i++ {
		cmd, err := r.command(context.Background(), "kill", "--all", id, "KILL")
		if err != nil {
			return
		}
		if cmd.Run() == nil || !r.known(id) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// known reports whether the runtime still has state for id (its state
// directory exists), without running the runtime.
func (r Runtime) known(id string) bool {
	_, err := os.Stat(filepath.Join(r.stateDir(), id))
	return err == nil
}

// status is the runtime's state of id ("running", "stopped", …), "" if unknown.
func (r Runtime) status(id string) string {
	if !r.known(id) {
		return ""
	}
	cmd, err := r.command(context.Background(), "state", id)
	if err != nil {
		return ""
	}
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	json.Unmarshal(out, &st)
	return st.Status
}

// cleanup deletes the container if the runtime still knows it (after a kill
// or a runtime failure) and removes its parent cgroup in every hierarchy.
func (r Runtime) cleanup(id string) error {
	var last []byte
	for i := 0; r.known(id); i++ {
		if i == 5 {
			return fmt.Errorf("sandbox: container %s still exists after delete: %s", id, bytes.TrimSpace(last))
		}
		cmd, err := r.command(context.Background(), "delete", "--force", id)
		if err != nil {
			return err
		}
		last, _ = cmd.CombinedOutput()
		if r.known(id) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, dir := range cgroupDirs(id) {
		// Leaves first (runc normally removed "ctr" already); a cgroup that
		// still has a dying task reports EBUSY for a moment.
		for _, d := range []string{filepath.Join(dir, "ctr"), dir} {
			var err error
			for i := 0; i < 50; i++ {
				if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				return fmt.Errorf("sandbox: remove cgroup %s: %w", d, err)
			}
		}
	}
	return nil
}

// memoryParent creates the per-run parent cgroup in the memory hierarchy
// with the run's memory limit and no swap (cgroup v1: memory.limit_in_bytes
// and memory.memsw.limit_in_bytes; v2: memory.max and memory.swap.max). The
// container's own cgroup is created beneath it by the runtime, so an OOM is
// an OOM of this parent, which outlives the container's cgroup. The returned
// watch says afterwards whether one happened: on v1 an eventfd registered
// on the parent's memory.oom_control (the kernel's OOM notification; the
// oom_kill counter is not propagated to parents on v1), on v2 the parent's
// memory.events oom_kill count.
func memoryParent(id string, limit int64) (*oomWatch, error) {
	v := strconv.FormatInt(limit, 10)
	if fi, err := os.Stat("/sys/fs/cgroup/memory"); err == nil && fi.IsDir() {
		dir := filepath.Join("/sys/fs/cgroup/memory", cgroupsParent(id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: memory cgroup: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(v), 0o644); err != nil {
			return nil, fmt.Errorf("sandbox: memory limit: %w", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(v), 0o644); err != nil {
				return nil, fmt.Errorf("sandbox: memory+swap limit: %w", err)
			}
		}
		return watchOOMv1(dir)
	}
	// cgroup v2 (unified hierarchy at /sys/fs/cgroup).
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		return nil, errors.New("sandbox: no memory cgroup controller found (need cgroup v1 memory or cgroup v2)")
	}
	dir := filepath.Join("/sys/fs/cgroup", cgroupsParent(id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: memory cgroup: %w", err)
	}
	for _, d := range []string{"/sys/fs/cgroup", filepath.Dir(dir)} {
		os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(v), 0o644); err != nil {
		return nil, fmt.Errorf("sandbox: memory limit: %w", err)
	}
	os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
	return &oomWatch{efd: -1, events: filepath.Join(dir, "memory.events")}, nil
}

// oomWatch tells whether the run's parent memory cgroup went out of memory.
type oomWatch struct {
	efd    int    // v1: eventfd registered for OOM notifications, or -1
	events string // v2: memory.events of the parent
}

func watchOOMv1(dir string) (*oomWatch, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("sandbox: eventfd: %w", err)
	}
	oc, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		unix.Close(efd)
		return nil, err
	}
	defer oc.Close()
	reg := fmt.Sprintf("%d %d", efd, oc.Fd())
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(reg), 0o200); err != nil {
		unix.Close(efd)
		return nil, fmt.Errorf("sandbox: register OOM notification: %w", err)
	}
	return &oomWatch{efd: efd}, nil
}

func (w *oomWatch) fired() bool {
	if w.efd >= 0 {
		var buf [8]byte
		n, err := unix.Read(w.efd, buf[:])
		return err == nil && n == 8
	}
	data, err := os.ReadFile(w.events)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n > 0
		}
	}
	return false
}

func (w *oomWatch) close() {
	if w.efd >= 0 {
		unix.Close(w.efd)
	}
}

// cgroupDirs lists the parent cgroup of id in each mounted hierarchy.
func cgroupDirs(id string) []string {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	var out []string
	for _, h := range hier {
		p := filepath.Join(h, cgroupsParent(id))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	return out
}
