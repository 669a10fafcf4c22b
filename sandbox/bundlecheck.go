package sandbox

import (
	"errors"
	"fmt"
	"github.com/dotlab/dotlab/internal/safefs"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ErrUnsafeSpec marks a claim whose image or working directory would take
// the runtime outside what checkBundle allows (a symlinked mount point, a
// working directory reached through a symlink or inside a kernel file
// system, a missing working directory). It is the claim's doing: the runner
// records spec_issue with the error text as the note.
var ErrUnsafeSpec = errors.New("sandbox: the claim cannot be run safely as written")

// kernelDirs are the kernel file systems a working directory must not be in
// (the same rule as manifest validation of working_dir): /proc/self/fd/N is
// how CVE-2024-21626 reached a leaked host fd.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// checkBundle checks a generated config before the runtime sees it, so that
// the preconditions of the runtime CVEs in docs/sandbox.md "The runtime's
// own version" cannot be met by what a claim controls (its image and its
// working_dir):
//
//   - cwd (CVE-2024-21626): absolute, clean, not in /proc, /sys or /dev, and
//     an existing directory reached without following any symlink, resolved
//     through the config's own mounts (code and data binds, the out tmpfs,
//     the image); a tmpfs is empty at start, so only its root qualifies.
//   - mount points (CVE-2025-31133, -52565, -52881 and their older
//     relatives): in the image, every path the runtime mounts on, and each
//     of its parents down to the first mounted one, is a directory or
//     absent, never a symlink, so no mount or procfs write is redirected by
//     the image.
//
// Those two return errors wrapping ErrUnsafeSpec. It also asserts the
// config's own invariants that the defences rest on (a fresh tmpfs /dev
// before any other /dev mount, no terminal, a non-root user with
// no-new-privileges and no capabilities, no sysctls, LSM labels or
// oom_score_adj, no shared mount propagation, read-only root); a failure
// there is a DotLab bug, returned as a plain error.
func checkBundle(cfg *specs.Spec) error {
	if err := checkInvariants(cfg); err != nil {
		return fmt.Errorf("sandbox: generated config breaks a runtime-CVE defence: %w", err)
	}
	if err := checkMountPoints(cfg); err != nil {
		return err
	}
	return checkCwd(cfg)
}

// checkInvariants asserts what docs/sandbox.md's CVE table relies on.
func checkInvariants(cfg *specs.Spec) error {
	p := cfg.Process
	switch {
	case p == nil || cfg.Linux == nil || cfg.Root == nil:
		return errors.New("process, linux and root must be set")
	case p.Terminal:
		return errors.New("process.terminal must be false (CVE-2025-52565: the /dev/console bind-mount)")
	case p.User.UID == 0 || p.User.GID == 0:
		return errors.New("process.user must not be root (CVE-2025-31133/-52565/-52881 mitigation)")
	case !p.NoNewPrivileges:
		return errors.New("process.noNewPrivileges must be true")
	case p.Capabilities == nil || len(p.Capabilities.Bounding)+len(p.Capabilities.Effective)+len(p.Capabilities.Permitted)+len(p.Capabilities.Inheritable)+len(p.Capabilities.Ambient) > 0:
		return errors.New("process.capabilities must all be empty")
	case p.ApparmorProfile != "" || p.SelinuxLabel != "" || cfg.Linux.MountLabel != "":
		return errors.New("no LSM labels: runc writes them through /proc (CVE-2025-52881)")
	case p.OOMScoreAdj != nil:
		return errors.New("no oomScoreAdj: runc writes it through /proc (CVE-2025-52881)")
	case len(cfg.Linux.Sysctl) > 0:
		return errors.New("no sysctls: runc writes them through /proc/sys (CVE-2025-52881)")
	case !cfg.Root.Readonly:
		return errors.New("root.readonly must be true")
	}
	switch cfg.Linux.RootfsPropagation {
	case "", "private", "rprivate", "slave", "rslave":
	default:
		return fmt.Errorf("rootfsPropagation %q: shared propagation lets another mount namespace race the runtime's (CVE-2025-52881)", cfg.Linux.RootfsPropagation)
	}
	devAt := -1
	for i, m := range cfg.Mounts {
		for _, o := range m.Options {
			if o == "shared" || o == "rshared" {
				return fmt.Errorf("mount %s: option %s: shared propagation lets another mount namespace race the runtime's (CVE-2025-52881)", m.Destination, o)
			}
		}
		under := m.Destination == "/dev" || strings.HasPrefix(m.Destination, "/dev/")
		switch {
		case m.Destination == "/dev":
			if m.Type != "tmpfs" || devAt >= 0 {
				return errors.New("/dev must be one fresh tmpfs (CVE-2025-31133: runc's own /dev/null masks files)")
			}
			devAt = i
		case under && devAt < 0:
			return fmt.Errorf("mount %s comes before the /dev tmpfs", m.Destination)
		case under && m.Type == "bind":
			return fmt.Errorf("mount %s: no bind mounts into /dev (CVE-2025-31133, -52565)", m.Destination)
		}
	}
	if devAt < 0 {
		return errors.New("/dev must be a tmpfs (CVE-2025-31133: runc's own /dev/null masks files)")
	}
	return nil
}

// checkMountPoints refuses an image in which a mount destination, or a
// parent of one down to the first mounted path, is not a directory.
func checkMountPoints(cfg *specs.Spec) error {
	dests := make([]string, 0, len(cfg.Mounts))
	for _, m := range cfg.Mounts {
		dests = append(dests, path.Clean(m.Destination))
	}
	for _, d := range dests {
		p := ""
		for _, c := range strings.Split(strings.TrimPrefix(d, "/"), "/") {
			p += "/" + c
			fi, err := os.Lstat(filepath.Join(cfg.Root.Path, p))
			if errors.Is(err, fs.ErrNotExist) {
				break // the runtime creates it (and everything beneath) as directories
			}
			if err != nil {
				return fmt.Errorf("%w: image path %s: %v", ErrUnsafeSpec, p, err)
			}
			if !fi.IsDir() {
				return fmt.Errorf("%w: the image has %s as a %s, but the sandbox mounts on it: a mount point must be a directory (or absent); rebuild the image with a plain directory there",
					ErrUnsafeSpec, p, safefs.FileKind(fi.Mode()))
			}
			if slices.Contains(dests, p) {
				break // mounted over: the image's content beneath is hidden
			}
		}
	}
	return nil
}

// checkCwd resolves process.cwd through the config's mounts, without
// following symlinks, and requires an existing directory.
func checkCwd(cfg *specs.Spec) error {
	cwd := cfg.Process.Cwd
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: working_dir %q %s", ErrUnsafeSpec, cwd, fmt.Sprintf(format, args...))
	}
	if !strings.HasPrefix(cwd, "/") || path.Clean(cwd) != cwd || strings.ContainsRune(cwd, 0) || len(cwd) > 1024 {
		return refuse("must be a clean absolute path of at most 1024 bytes (e.g. %s)", CodeDir)
	}
	for _, k := range kernelDirs {
		if cwd == k || strings.HasPrefix(cwd, k+"/") {
			return refuse("is inside %s, a kernel file system: use a directory such as %s", k, CodeDir)
		}
	}
	// The mount that holds cwd: the longest destination that is cwd or a parent of it.
	root, rel := cfg.Root.Path, cwd
	var holder *specs.Mount
	for i := range cfg.Mounts {
		m := &cfg.Mounts[i]
		d := path.Clean(m.Destination)
		if (cwd == d || strings.HasPrefix(cwd, d+"/") || d == "/") && (holder == nil || len(d) > len(path.Clean(holder.Destination))) {
			holder = m
		}
	}
	if holder != nil {
		d := path.Clean(holder.Destination)
		rel = strings.TrimPrefix(strings.TrimPrefix(cwd, d), "/")
		switch holder.Type {
		case "bind":
			root = holder.Source
		case "tmpfs":
			if rel != "" {
				return refuse("is below %s, a fresh tmpfs that is empty when the analysis starts: use %s itself or a directory of the code", d, d)
			}
			return nil
		default:
			return refuse("is inside %s, a %s file system: use a directory such as %s", d, holder.Type, CodeDir)
		}
	}
	p := root
	shown := "/"
	if holder != nil {
		shown = path.Clean(holder.Destination)
	}
	for _, c := range strings.Split(strings.TrimPrefix(rel, "/"), "/") {
		if c == "" {
			continue
		}
		p = filepath.Join(p, c)
		shown = path.Join(shown, c)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if holder == nil && parentOfMount(cfg, shown) {
				continue // the runtime creates it as a directory for a mount beneath
			}
			return refuse("does not exist (%s is missing): create it in the code or the image", shown)
		}
		if err != nil {
			return refuse("cannot be checked: %v", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return refuse("goes through the symlink %s: the working directory must be reached without symlinks; name the real directory", shown)
		}
		if !fi.IsDir() {
			return refuse("has %s, a %s, where a directory must be", shown, safefs.FileKind(fi.Mode()))
		}
	}
	return nil
}

// parentOfMount reports whether p is a proper parent of a mount destination.
func parentOfMount(cfg *specs.Spec, p string) bool {
	for _, m := range cfg.Mounts {
		if strings.HasPrefix(path.Clean(m.Destination), p+"/") {
			return true
		}
	}
	return false
}
