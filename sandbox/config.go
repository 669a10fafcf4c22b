// Package sandbox runs one command in an OCI container (runc, or gVisor's
// runsc) under the DotLab execution contract (docs/threat-model.md "Hostile
// analysis code", "The execution contract"): read-only root,
// code read-only at /work/code, data read-only and noexec at /work/data,
// helpers read-only at /work/helpers, a size-capped writable /work/out
// (noexec), an opt-in writable overlay copy of the code at /work/scratch
// (scratch.go), tmpfs /tmp, its own network
// namespace with loopback only, no capabilities, no-new-privileges, a
// non-root uid, a seccomp profile, cgroup limits, a hard timeout enforced by
// `runc kill` + `runc delete`, and no host environment. docs/sandbox.md
// explains each setting and what it defends against.
package sandbox

import (
	"fmt"
	"github.com/dotlab/dotlab"
	"path"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Paths inside the sandbox (docs/sandbox.md "Isolation settings").
const (
	CodeDir    = "/work/code"
	DataDir    = "/work/data"
	OutDir     = "/work/out"
	HelpersDir = "/work/helpers"
	ScratchDir = "/work/scratch"
)

// UID and GID the analysis runs as: not root, and far above the range host
// accounts use, so that no host user shares it (a shared uid could signal
// the analysis or write into its output). No user namespace is used, so
// files it writes come back owned by this uid on the host.
const (
	UID = 1590000
	GID = 1590000
)

// ociVersion is what the generated config declares: runc 1.1.5 and runsc
// 2022-12 speak runtime-spec 1.0.2 (crun rejects 1.2.0 and later).
const ociVersion = "1.0.2"

// Spec is what one sandboxed run executes.
type Spec struct {
	// Rootfs is the unpacked image (imagestore.Store.Rootfs); mounted read-only.
	Rootfs string
	// CodeDir and DataDir are host directories bound read-only at /work/code
	// and /work/data (data also noexec).
	CodeDir, DataDir string
	// HelpersDir, when set, is a host directory bound read-only at
	// /work/helpers (ro, nosuid, nodev).
	HelpersDir string
	// Scratch gives the analysis a writable copy of the code at
	// /work/scratch: an overlay whose lower layer is CodeDir (left
	// unchanged) and whose upper layer is a tmpfs of Limits.ScratchBytes,
	// discarded after the run (scratch.go).
	Scratch bool
	// Keep lists files of /work/scratch (clean relative paths) to read
	// after the run from what the run wrote (Result.Kept); nothing else of
	// the scratch copy leaves the sandbox.
	Keep []string
	// Args is the entrypoint argv (no shell is added).
	Args []string
	// ImageEnv is the image config's environment (PATH etc.); DOTLAB_* are
	// added on top. Nothing comes from the host.
	ImageEnv []string
	// Seed, when set, is exported as DOTLAB_SEED.
	Seed *int64
	// PackageEnv is the manifest's environment.env (spec v0.2), already
	// held to its allow-list by manifest.Check: set over the image's
	// variables of the same name, never over the ones Env sets itself.
	PackageEnv map[string]string
	// WorkingDir is the cwd inside the sandbox; empty means /work/code.
	WorkingDir string
	Limits     Limits
	// Downloads are the pinned URLs a local responder answers inside the
	// sandbox (docs/sandbox.md "Pinned downloads"); none: nothing is
	// started and the sandbox is as without them.
	Downloads []Download
}

// Limits bound one run. Zero values take the defaults in WithDefaults.
type Limits struct {
	// Timeout is the wall-clock limit, enforced with kill + delete.
	TimeoutSeconds int
	// MemoryBytes is the cgroup memory limit (swap included: no swap). The
	// output tmpfs and /tmp are charged to it too.
	MemoryBytes int64
	// CPUs is the CFS quota in cores (0.5 = half a core).
	CPUs float64
	// Pids caps the number of processes and threads (fork bombs stop here).
	Pids int64
	// OutputBytes caps the size of /work/out (a tmpfs of this size).
	OutputBytes int64
	// OutputFiles caps the number of inodes in /work/out.
	OutputFiles int64
	// ScratchBytes and ScratchFiles cap what the run may write into its
	// scratch copy (the overlay's upper tmpfs); defaults: the output caps.
	ScratchBytes, ScratchFiles int64
}

// WithDefaults fills zero fields: 600 s, 1 GiB, 1 CPU, 512 pids, 1 GiB and
// 100000 files of output (docs/manifest-spec.md "`limits`" for the manifest's
// three, docs/sandbox.md "Every limit at a glance" for the rest).
func (l Limits) WithDefaults() Limits {
	if l.TimeoutSeconds <= 0 {
		l.TimeoutSeconds = dotlab.DefaultTimeoutSeconds
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = dotlab.DefaultMemoryMB << 20
	}
	if l.CPUs <= 0 {
		l.CPUs = dotlab.DefaultCPUs
	}
	if l.Pids <= 0 {
		l.Pids = DefaultPids
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	if l.OutputFiles <= 0 {
		l.OutputFiles = DefaultOutputFiles
	}
	if l.ScratchBytes <= 0 {
		l.ScratchBytes = DefaultOutputBytes
	}
	if l.ScratchFiles <= 0 {
		l.ScratchFiles = DefaultOutputFiles
	}
	return l
}

// The sandbox's own defaults; timeout, memory and CPUs default to the
// manifest's (dotlab.DefaultTimeoutSeconds, DefaultMemoryMB, DefaultCPUs).
const (
	DefaultPids        = 512     // processes and threads
	DefaultOutputBytes = 1 << 30 // bytes of /work/out, apparent sizes
	DefaultOutputFiles = 100_000 // entries of /work/out
)

// envOrder is the order of the variables Env sets over the image's.
var envOrder = []string{"HOME", "TMPDIR", "LANG", "DOTLAB_DATA_DIR", "DOTLAB_OUT_DIR", "DOTLAB_HELPERS_DIR", "DOTLAB_SCRATCH_DIR", "DOTLAB_SEED"}

// Env is the complete environment of the analysis: the image's variables,
// then HOME=/tmp, TMPDIR=/tmp, LANG=C.UTF-8, DOTLAB_DATA_DIR,
// DOTLAB_OUT_DIR, DOTLAB_HELPERS_DIR and DOTLAB_SCRATCH_DIR (when those
// exist) and DOTLAB_SEED (when set), which override any image variable of
// the same name.
func (s Spec) Env() []string {
	override := map[string]string{
		"HOME":            "/tmp",
		"TMPDIR":          "/tmp",
		"LANG":            "C.UTF-8",
		"DOTLAB_DATA_DIR": DataDir,
		"DOTLAB_OUT_DIR":  OutDir,
	}
	if s.HelpersDir != "" {
		override["DOTLAB_HELPERS_DIR"] = HelpersDir
	}
	if s.Scratch {
		override["DOTLAB_SCRATCH_DIR"] = ScratchDir
	}
	if s.Seed != nil {
		override["DOTLAB_SEED"] = strconv.FormatInt(*s.Seed, 10)
	}
	if len(s.Downloads) > 0 {
		for k, v := range downloadEnv() {
			override[k] = v
		}
	}
	var env []string
	hasPath := false
	for _, kv := range s.ImageEnv {
		k := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				k = kv[:i]
				break
			}
		}
		if _, ok := override[k]; ok {
			continue
		}
		if _, ok := s.PackageEnv[k]; ok && k != "PATH" {
			continue
		}
		if k == "PATH" {
			hasPath = true
		}
		env = append(env, kv)
	}
	if !hasPath {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	env = append(env, packageEnv(s.PackageEnv, override)...)
	for _, k := range append(envOrder, downloadEnvOrder...) {
		if v, ok := override[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// ociConfig builds the runtime-spec config for one run. outHost is the host
// directory (a size-capped tmpfs) bound at /work/out, scratchHost the
// overlay bound at /work/scratch (when s.Scratch); cgroupsPath places the
// container's cgroups (cgroupfs driver: "/dotlab/<id>").
func ociConfig(s Spec, outHost, scratchHost, cgroupsPath string, runsc bool) *specs.Spec {
	l := s.Limits.WithDefaults()
	mem := l.MemoryBytes
	return &specs.Spec{
		Version: ociVersion,
		Process: ociProcess(s, l),
		Annotations: map[string]string{
			"org.dotlab.memory.limit_in_bytes": strconv.FormatInt(mem, 10),
			"org.dotlab.memory.cgroup":         path.Dir(cgroupsPath) + " (parent, set by dotlab, no swap)",
		},
		Root:     &specs.Root{Path: s.Rootfs, Readonly: true},
		Hostname: "sandbox",
		Mounts:   ociMounts(s, outHost, scratchHost, mem),
		Linux:    ociLinux(l, cgroupsPath, runsc),
	}
}

// ociProcess is the analysis process: s's arguments and environment as uid
// and gid UID/GID, no capabilities, no new privileges, and rlimits.
func ociProcess(s Spec, l Limits) *specs.Process {
	cwd := s.WorkingDir
	if cwd == "" {
		cwd = CodeDir
	}
	noCaps := []string{}
	rlim := func(typ string, n uint64) specs.POSIXRlimit { return specs.POSIXRlimit{Type: typ, Hard: n, Soft: n} }
	return &specs.Process{
		Terminal: false,
		User:     specs.User{UID: UID, GID: GID},
		Args:     s.Args,
		Env:      s.Env(),
		Cwd:      cwd,
		Capabilities: &specs.LinuxCapabilities{
			Bounding: noCaps, Effective: noCaps, Inheritable: noCaps, Permitted: noCaps, Ambient: noCaps,
		},
		// Below the hard limits measured on this project's machines (nofile
		// hard limit 20000; root lacks CAP_SYS_RESOURCE to raise them). The
		// values: docs/sandbox.md "Isolation settings", rlimits.
		Rlimits: []specs.POSIXRlimit{
			rlim("RLIMIT_NOFILE", 1024),
			rlim("RLIMIT_CORE", 0),
			rlim("RLIMIT_FSIZE", uint64(l.OutputBytes)),
		},
		NoNewPrivileges: true,
	}
}

// ociMounts are the container's mounts: the kernel file systems, a /tmp
// tmpfs of mem bytes, the code and data read-only and outHost at /work/out,
// then the helpers read-only and the scratch copy writable when the spec has them.
func ociMounts(s Spec, outHost, scratchHost string, mem int64) []specs.Mount {
	ro := []string{"nosuid", "nodev", "noexec", "ro"}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(mem, 10)}},
		{Destination: CodeDir, Type: "bind", Source: s.CodeDir, Options: append([]string{"rbind"}, "nosuid", "nodev", "ro")},
		{Destination: DataDir, Type: "bind", Source: s.DataDir, Options: append([]string{"rbind"}, ro...)},
		{Destination: OutDir, Type: "bind", Source: outHost, Options: []string{"rbind", "nosuid", "nodev", "noexec", "rw"}},
	}
	if s.HelpersDir != "" {
		mounts = append(mounts, specs.Mount{Destination: HelpersDir, Type: "bind", Source: s.HelpersDir, Options: []string{"rbind", "nosuid", "nodev", "ro"}})
	}
	if s.Scratch {
		mounts = append(mounts, specs.Mount{Destination: ScratchDir, Type: "bind", Source: scratchHost, Options: []string{"rbind", "nosuid", "nodev", "rw"}})
	}
	return mounts
}

// ociLinux is the Linux section: namespaces, the device, pids and CPU
// limits (memory is on the parent cgroup), seccomp and the masked and
// read-only paths of /proc and /sys.
func ociLinux(l Limits, cgroupsPath string, runsc bool) *specs.Linux {
	pids := l.Pids
	if runsc && pids < 1024 {
		// gVisor's own threads count against the pids limit (docs/sandbox.md
		// "Running with gVisor (runsc)").
		pids = 1024
	}
	period := uint64(100000)
	quota := int64(l.CPUs * float64(period))
	return &specs.Linux{
		CgroupsPath: cgroupsPath,
		Namespaces: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace},
			{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
		},
		Resources: &specs.LinuxResources{
			Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			// Memory is limited on the parent cgroup (memoryParent), where
			// the OOM-kill count outlives the container's own cgroup.
			Pids: &specs.LinuxPids{Limit: &pids},
			CPU:  &specs.LinuxCPU{Quota: &quota, Period: &period},
		},
		Seccomp: seccompProfile(),
		MaskedPaths: []string{
			"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
			"/sys/firmware", "/sys/devices/virtual/powercap",
		},
		ReadonlyPaths: []string{
			"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
		},
	}
}

// deniedSyscalls fail with EPERM: kernel surfaces an analysis never needs and
// that container escapes have used (module loading, mounts, namespaces and
// user namespaces, BPF, perf, ptrace and cross-process memory access,
// keyrings, userfaultfd, io_uring, kexec, clock and swap changes).
var deniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
	"fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms",
	"init_module", "io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl", "kcmp",
	"kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr", "move_mount",
	"name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open",
	"pidfd_getfd", "pivot_root", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace",
	"query_module", "quotactl", "reboot", "request_key", "setdomainname", "sethostname", "setns",
	"settimeofday", "stime", "swapoff", "swapon", "syslog", "sysfs", "_sysctl", "umount", "umount2",
	"unshare", "uselib", "userfaultfd", "ustat", "vhangup", "vm86", "vm86old",
}

// seccompProfile allows by default and denies the calls above, clone with
// any namespace flag, and clone3 (ENOSYS, so libc falls back to clone, whose
// flags a filter can see).
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	for _, flag := range []uint64{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWNET, unix.CLONE_NEWPID,
		unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWCGROUP} {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
		})
	}
	return p
}

// cgroupsPathFor is the cgroupfs path of container id (runc's cgroupfs driver;
// the hosts this was measured on run no systemd): a leaf
// "ctr" under a per-run parent, see Runtime.execute.
func cgroupsPathFor(id string) string { return cgroupsParent(id) + "/ctr" }

// cgroupsParent is the per-run parent cgroup of container id.
func cgroupsParent(id string) string { return fmt.Sprintf("/dotlab/%s", id) }

// Config is the runtime-spec config.json that Run generates for spec, with
// /work/out bound from outHost, for container id (runsc: gVisor's pids floor).
// Exposed for documentation and benchmarks (bench/ runs it with bare runc).
func Config(spec Spec, outHost, id string, runsc bool) *specs.Spec {
	return ociConfig(spec, outHost, "", cgroupsPathFor(id), runsc)
}
