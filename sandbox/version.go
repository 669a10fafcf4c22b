package sandbox

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"github.com/dotlab/dotlab"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Runtime CVEs that docs/sandbox.md "The runtime's own version" discusses.
const (
	// CVE-2024-21626 ("Leaky Vessels"): runc before 1.1.12 leaked a host
	// directory fd (/sys/fs/cgroup) into the container; a cwd or argv
	// through /proc/self/fd/N reached the host filesystem. Fixed upstream
	// in 1.1.12 and by distribution backports (Debian bookworm
	// 1.1.5+ds1-1+deb12u1). DotLab refuses runc builds without the fix.
	CVE202421626 = "CVE-2024-21626"
	// CVE-2025-31133: maskedPaths bind-mount the container's /dev/null
	// without checking it is the real device (a symlink planted or raced
	// there redirects the mount). Fixed upstream in 1.2.8, 1.3.3, 1.4.0-rc.3.
	CVE202531133 = "CVE-2025-31133"
	// CVE-2025-52565: the /dev/console bind-mount of containers with a
	// terminal is made before maskedPaths/readonlyPaths and is not checked.
	// Same fixed releases.
	CVE202552565 = "CVE-2025-52565"
	// CVE-2025-52881: runc's writes to /proc (LSM labels, sysctls) can be
	// redirected to other procfs files through racing shared mounts. Same
	// fixed releases.
	CVE202552881 = "CVE-2025-52881"
)

// ErrRuntimeRefused marks a runtime build DotLab will not run analyses
// with (see Runtime.CheckVersion). The run has no outcome: the runner's
// machine, not the claim, must change.
var ErrRuntimeRefused = errors.New("sandbox: OCI runtime build refused")

// RuntimeVersion identifies the OCI runtime build that executed a run: the
// run record's environment.runtime (dotlab.RuntimeInfo, whose fields say
// where each value comes from: `NAME --version`, dpkg, the package's
// Debian changelog for Fixes, sorted as in the CVE constants above).
type RuntimeVersion = dotlab.RuntimeInfo

// Bounds of version probing: the runtime's and dpkg's outputs are read up to
// maxProbeOutput bytes, each value kept must be at most maxVersionField
// printable ASCII bytes, a Debian changelog is read up to maxChangelog
// decompressed bytes, and each probe command gets probeTimeout.
const (
	maxProbeOutput  = 16 << 10
	maxVersionField = 128
	maxChangelog    = 8 << 20
	probeTimeout    = 10 * time.Second
)

// Version runs `BINARY --version` and, when dpkg is installed, asks which
// package owns the binary and in which version, then derives Fixes. It
// fails when the binary cannot be run, its output is over 16 KiB, or a
// field is not printable ASCII of at most 128 bytes; a missing dpkg is not
// an error (Package stays empty). Each command runs with a 10 s deadline
// and an empty environment (PATH only).
func (r Runtime) Version(ctx context.Context) (RuntimeVersion, error) {
	bin, err := r.binary()
	if err != nil {
		return RuntimeVersion{}, err
	}
	out, err := probe(ctx, bin, "--version")
	if err != nil {
		return RuntimeVersion{}, fmt.Errorf("sandbox: %s --version: %w", bin, err)
	}
	v, err := parseVersion(r.name(), out)
	if err != nil {
		return RuntimeVersion{}, fmt.Errorf("sandbox: %s --version: %w", bin, err)
	}
	changelog := ""
	if pkg, pkgVersion, ok := dpkgOwner(ctx, bin); ok {
		v.Package, v.PackageVersion = pkg, pkgVersion
		changelog = readChangelog(pkg)
	}
	v.Fixes = fixes(v, changelog)
	return v, nil
}

// CheckVersion is Version plus DotLab's rule for runtime builds
// (docs/sandbox.md "The runtime's own version"):
//
//   - runc must carry the CVE-2024-21626 fix: upstream 1.1.12 or later, or
//     a package whose Debian changelog names CVE-2024-21626 (Debian
//     bookworm's 1.1.5+ds1-1+deb12u1 does). Without it the leaked host fd
//     is open inside every container, whatever the config says, so no
//     bundle-side defence holds. Otherwise the error wraps
//     ErrRuntimeRefused and names the version and the fix.
//   - The 2025 set (CVE-2025-31133, -52565, -52881) is not required: the
//     bundles DotLab writes do not meet their preconditions (checked on
//     every run by checkBundle), so builds without those fixes (all runc
//     1.1.x) are accepted and the missing fixes are visible in Fixes.
//   - runsc (gVisor) does not share runc's code; any version is accepted
//     and recorded.
//
// The result is remembered in r (keyed by the binary's device, inode, size
// and mtime), so Run does not probe again while the binary is unchanged;
// call it on the Runtime value you keep (e.g. the runner's field). With
// r.VersionCache set it is also remembered in that file, under the same
// key, for the next process (sandbox/versioncache.go).
func (r *Runtime) CheckVersion(ctx context.Context) (RuntimeVersion, error) {
	bin, err := r.binary()
	if err != nil {
		return RuntimeVersion{}, err
	}
	id, err := binaryIdentity(bin)
	if err != nil {
		return RuntimeVersion{}, err
	}
	if r.checked != nil && r.checked.binary == id {
		return r.checked.version, nil
	}
	v, cached := r.loadVersionCache(id)
	if !cached {
		if v, err = r.Version(ctx); err != nil {
			return RuntimeVersion{}, err
		}
	}
	// The rule is applied to a cached result too: only the probing is saved.
	if err := versionRule(v); err != nil {
		return v, err
	}
	if !cached {
		r.storeVersionCache(id, v)
	}
	r.checked = &checkedVersion{binary: id, version: v}
	return v, nil
}

// checkedVersion is a CheckVersion result and the binary it was made for.
type checkedVersion struct {
	binary  string
	version RuntimeVersion
}

// binaryIdentity is "path dev:ino size mtime" of the runtime binary (after
// symlinks), so a replaced binary is probed again.
func binaryIdentity(bin string) (string, error) {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "", fmt.Errorf("sandbox: runtime binary: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("sandbox: runtime binary: %w", err)
	}
	var dev, ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		dev, ino = st.Dev, st.Ino
	}
	return fmt.Sprintf("%s %d:%d %d %d", real, dev, ino, fi.Size(), fi.ModTime().UnixNano()), nil
}

// versionRule applies CheckVersion's rule to v.
func versionRule(v RuntimeVersion) error {
	switch v.Name {
	case "runsc":
		return nil
	case "runc":
		if v.Has(CVE202421626) {
			return nil
		}
		build := "runc " + v.Version
		if v.Package != "" {
			build += " (package " + v.Package + " " + v.PackageVersion + ")"
		}
		return fmt.Errorf("%w: %s lacks the %s fix (a host directory fd leaks into every container; upstream fixed it in runc 1.1.12, Debian bookworm in 1.1.5+ds1-1+deb12u1): install runc 1.1.12 or later, or your distribution's security update (Debian: apt-get install runc), or use --runtime runsc",
			ErrRuntimeRefused, build, CVE202421626)
	}
	return fmt.Errorf("%w: runtime %q: want runc or runsc", ErrRuntimeRefused, v.Name)
}

// fixes derives RuntimeVersion.Fixes from the upstream version and the
// package's Debian changelog text (empty when unknown).
func fixes(v RuntimeVersion, changelog string) []string {
	if v.Name != "runc" {
		return nil
	}
	up, upOK := parseSemver(v.Version)
	var out []string
	for _, c := range []struct {
		cve   string
		fixed func(semver) bool
	}{
		{CVE202421626, func(s semver) bool { return !s.less(semver{1, 1, 12, false}) }},
		{CVE202531133, fixed2025},
		{CVE202552565, fixed2025},
		{CVE202552881, fixed2025},
	} {
		if (upOK && c.fixed(up)) || strings.Contains(changelog, c.cve) {
			out = append(out, c.cve)
		}
	}
	return out
}

// fixed2025 reports whether upstream runc s has the November 2025 fixes:
// 1.2.8+ on 1.2.x, 1.3.3+ on 1.3.x, 1.4.0-rc.3 or later on 1.4 (pre-releases
// of 1.4.0 are counted as unfixed: only rc.3 has them), any 1.5 or later.
func fixed2025(s semver) bool {
	switch {
	case s.major != 1:
		return s.major > 1
	case s.minor <= 1:
		return false
	case s.minor == 2:
		return s.patch >= 8
	case s.minor == 3:
		return s.patch >= 3
	case s.minor == 4:
		return !(s.patch == 0 && s.pre)
	}
	return true
}

// semver is an upstream x.y.z with a flag for a pre-release suffix (-rc.N).
type semver struct {
	major, minor, patch int
	pre                 bool
}

func (a semver) less(b semver) bool {
	if a.major != b.major {
		return a.major < b.major
	}
	if a.minor != b.minor {
		return a.minor < b.minor
	}
	if a.patch != b.patch {
		return a.patch < b.patch
	}
	return a.pre && !b.pre
}

// parseSemver reads "1.1.5+ds1", "v1.2.8", "1.4.0-rc.3": three decimal
// numbers, then an optional "-pre" and "+build"; false otherwise.
func parseSemver(s string) (semver, bool) {
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	var v semver
	if i := strings.IndexByte(s, '-'); i >= 0 {
		v.pre = true
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return semver{}, false
	}
	n := make([]int, 3)
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || len(p) > 6 {
			return semver{}, false
		}
		n[i] = x
	}
	v.major, v.minor, v.patch = n[0], n[1], n[2]
	return v, true
}

// parseVersion reads `runc --version` / `runsc --version` output:
//
//	runc version 1.1.5+ds1
//	commit: 1.1.5+ds1-1+deb12u1
//	spec: 1.0.2-dev
//
// The first line must be "NAME version V"; "commit:" and "spec:" lines are
// optional, other lines are ignored.
func parseVersion(name string, out []byte) (RuntimeVersion, error) {
	v := RuntimeVersion{Name: name}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1024), maxProbeOutput)
	first := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if first {
			first = false
			rest, ok := strings.CutPrefix(line, name+" version ")
			if !ok {
				return v, fmt.Errorf("first line %q is not %q", clip(line), name+" version X")
			}
			v.Version = strings.TrimSpace(rest)
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "commit":
			v.Commit = strings.TrimSpace(val)
		case "spec":
			v.Spec = strings.TrimSpace(val)
		}
	}
	if err := sc.Err(); err != nil {
		return v, err
	}
	if v.Version == "" {
		return v, errors.New("no version printed")
	}
	for field, s := range map[string]string{"version": v.Version, "commit": v.Commit, "spec": v.Spec} {
		if err := checkField(s); err != nil {
			return v, fmt.Errorf("%s %q: %w", field, clip(s), err)
		}
	}
	return v, nil
}

// checkField accepts printable ASCII without spaces of at most maxVersionField bytes.
func checkField(s string) error {
	if len(s) > maxVersionField {
		return fmt.Errorf("is %d bytes, at most %d", len(s), maxVersionField)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return errors.New("has a character outside printable ASCII")
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// probe runs name args with a deadline, no environment but PATH, no stdin,
// and returns stdout; more than maxProbeOutput bytes is an error.
func probe(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var out limitedBuffer
	out.max = maxProbeOutput
	cmd.Stdout = &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	if out.over {
		return nil, fmt.Errorf("output over %d bytes", maxProbeOutput)
	}
	return out.buf.Bytes(), nil
}

// limitedBuffer keeps up to max bytes and records whether more came.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// dpkgOwner asks dpkg which package installed bin (trying the path as given
// and with symlinks resolved, for merged /usr) and its version.
func dpkgOwner(ctx context.Context, bin string) (pkg, version string, ok bool) {
	dq, err := exec.LookPath("dpkg-query")
	if err != nil {
		return "", "", false
	}
	paths := []string{bin}
	if real, err := filepath.EvalSymlinks(bin); err == nil && real != bin {
		paths = append(paths, real)
	}
	for _, p := range paths {
		// The cheap way first: the package named like the binary (runc,
		// runsc) whose file list names the path; `dpkg-query -S` reads
		// every package's list, which on a loaded machine can outlast
		// probeTimeout and so refuse a fixed runc.
		if name, ver, ok := namedOwner(ctx, dq, p); ok {
			return name, ver, true
		}
		out, err := probe(ctx, dq, "-S", p)
		if err != nil {
			continue
		}
		// "runc: /usr/sbin/runc" (one line per owner; diversions add lines).
		for _, line := range strings.Split(string(out), "\n") {
			name, file, found := strings.Cut(line, ": ")
			if !found || strings.TrimSpace(file) != p || strings.Contains(name, ",") {
				continue
			}
			name = strings.TrimSpace(name)
			if checkField(name) != nil {
				continue
			}
			vout, err := probe(ctx, dq, "-W", "-f=${Version}", name)
			if err != nil {
				continue
			}
			ver := strings.TrimSpace(string(vout))
			if checkField(ver) != nil {
				continue
			}
			return name, ver, true
		}
	}
	return "", "", false
}

// dpkgInfoDir is where dpkg keeps each package's file list (NAME.list).
const dpkgInfoDir = "/var/lib/dpkg/info"

// maxFileList bounds the file list namedOwner reads.
const maxFileList = 1 << 20

// namedOwner is dpkgOwner's fast path for path p: the package named as p's
// base name, when its file list (dpkgInfoDir/NAME.list, at most
// maxFileList bytes) holds p as a whole line, with its version from dpq.
func namedOwner(ctx context.Context, dpq, p string) (pkg, version string, ok bool) {
	name := filepath.Base(p)
	if checkField(name) != nil || strings.ContainsAny(name, "/:,") {
		return "", "", false
	}
	f, err := os.Open(filepath.Join(dpkgInfoDir, name+".list"))
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	list, err := io.ReadAll(io.LimitReader(f, maxFileList))
	if err != nil || !slices.Contains(strings.Split(string(list), "\n"), p) {
		return "", "", false
	}
	vout, err := probe(ctx, dpq, "-W", "-f=${Version}", name)
	if err != nil {
		return "", "", false
	}
	ver := strings.TrimSpace(string(vout))
	if checkField(ver) != nil || ver == "" {
		return "", "", false
	}
	return name, ver, true
}

// readChangelog returns the package's Debian changelog
// (/usr/share/doc/PKG/changelog.Debian.gz), at most maxChangelog bytes
// decompressed; "" when absent or unreadable.
func readChangelog(pkg string) string {
	if pkg == "" || strings.ContainsAny(pkg, "/\x00") || pkg == "." || pkg == ".." {
		return ""
	}
	f, err := os.Open(filepath.Join("/usr/share/doc", pkg, "changelog.Debian.gz"))
	if err != nil {
		return ""
	}
	defer f.Close()
	zr, err := gzip.NewReader(io.LimitReader(f, maxChangelog))
	if err != nil {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(zr, maxChangelog))
	return string(data)
}
