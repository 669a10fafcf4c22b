package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestVersionRule: parsing of --version outputs seen in the wild and the
// rule that refuses runc builds without the CVE-2024-21626 fix.
func TestVersionRule(t *testing.T) {
	debian := "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n"
	for _, c := range []struct {
		name, out, changelog string
		pkg                  string
		wantFixes            []string
		refused              bool
	}{
		{"debian bookworm security build", debian, "runc (1.1.5+ds1-1+deb12u1) bookworm-security\n  * CVE-2024-21626: several container breakouts\n", "runc", []string{CVE202421626}, false},
		{"debian 1.1.5 without the backport", debian, "runc (1.1.5+ds1-1) unstable\n  * New upstream version\n", "runc", nil, true},
		{"upstream 1.1.11", "runc version 1.1.11\ncommit: v1.1.11-0-g4bccb38\nspec: 1.0.2-dev\n", "", "", nil, true},
		{"upstream 1.1.12", "runc version 1.1.12\ncommit: v1.1.12-0-g51d5e94\nspec: 1.0.2-dev\n", "", "", []string{CVE202421626}, false},
		{"upstream 1.2.7", "runc version 1.2.7\nspec: 1.2.0\n", "", "", []string{CVE202421626}, false},
		{"upstream 1.2.8", "runc version 1.2.8\nspec: 1.2.0\n", "", "", []string{CVE202421626, CVE202531133, CVE202552565, CVE202552881}, false},
		{"upstream 1.3.2", "runc version 1.3.2\n", "", "", []string{CVE202421626}, false},
		{"upstream 1.3.3", "runc version 1.3.3\n", "", "", []string{CVE202421626, CVE202531133, CVE202552565, CVE202552881}, false},
		{"upstream 1.4.0-rc.2", "runc version 1.4.0-rc.2\n", "", "", []string{CVE202421626}, false},
		{"upstream 1.4.0", "runc version 1.4.0\n", "", "", []string{CVE202421626, CVE202531133, CVE202552565, CVE202552881}, false},
		{"unparsable version", "runc version unknown\n", "", "", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := parseVersion("runc", []byte(c.out))
			if err != nil {
				t.Fatal(err)
			}
			if c.pkg != "" {
				v.Package, v.PackageVersion = c.pkg, "x"
			}
			v.Fixes = fixes(v, c.changelog)
			if !slices.Equal(v.Fixes, c.wantFixes) {
				t.Errorf("fixes %v, want %v", v.Fixes, c.wantFixes)
			}
			err = versionRule(v)
			if c.refused != (err != nil) || (err != nil && !errors.Is(err, ErrRuntimeRefused)) {
				t.Fatalf("rule: %v (want refused=%v)", err, c.refused)
			}
			if err != nil && (!strings.Contains(err.Error(), "runc "+v.Version) || !strings.Contains(err.Error(), "1.1.12")) {
				t.Errorf("refusal %q names neither the version nor the fix", err)
			}
		})
	}
	v, err := parseVersion("runsc", []byte("runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n"))
	if err != nil || v.Version != "0.0~20221219.0" || v.Spec != "1.0.2-dev" || versionRule(v) != nil {
		t.Fatalf("runsc: %+v %v", v, err)
	}
	for name, out := range map[string]string{
		"wrong first line": "crun version 1.8.1\n",
		"empty":            "",
		"long field":       "runc version " + strings.Repeat("1", 200) + "\n",
		"control char":     "runc version 1.1.12\x1b[31m\n",
	} {
		if _, err := parseVersion("runc", []byte(out)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestBundleInvariants: DotLab's own config passes checkInvariants, and
// each change that would reopen a runtime CVE's precondition is caught.
func TestBundleInvariants(t *testing.T) {
	base := func() *specs.Spec {
		return Config(Spec{Rootfs: t.TempDir(), CodeDir: t.TempDir(), DataDir: t.TempDir(), Args: []string{"true"}}, t.TempDir(), "dotlab-x", false)
	}
	if err := checkInvariants(base()); err != nil {
		t.Fatalf("our config: %v", err)
	}
	adj := 0
	for name, mutate := range map[string]func(*specs.Spec){
		"terminal":       func(c *specs.Spec) { c.Process.Terminal = true },
		"root user":      func(c *specs.Spec) { c.Process.User.UID = 0 },
		"new privileges": func(c *specs.Spec) { c.Process.NoNewPrivileges = false },
		"a capability":   func(c *specs.Spec) { c.Process.Capabilities.Bounding = []string{"CAP_SYS_ADMIN"} },
		"apparmor":       func(c *specs.Spec) { c.Process.ApparmorProfile = "docker-default" },
		"selinux":        func(c *specs.Spec) { c.Process.SelinuxLabel = "system_u:system_r:container_t:s0" },
		"oom_score_adj":  func(c *specs.Spec) { c.Process.OOMScoreAdj = &adj },
		"sysctl":         func(c *specs.Spec) { c.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1"} },
		"writable root":  func(c *specs.Spec) { c.Root.Readonly = false },
		"shared rootfs":  func(c *specs.Spec) { c.Linux.RootfsPropagation = "rshared" },
		"shared mount": func(c *specs.Spec) {
			c.Mounts[len(c.Mounts)-1].Options = append(c.Mounts[len(c.Mounts)-1].Options, "rshared")
		},
		"bind into /dev": func(c *specs.Spec) {
			c.Mounts = append(c.Mounts, specs.Mount{Destination: "/dev/null", Type: "bind", Source: "/tmp/x"})
		},
		"/dev not tmpfs":      func(c *specs.Spec) { c.Mounts[1].Type = "bind" },
		"no /dev":             func(c *specs.Spec) { c.Mounts = slices.Delete(c.Mounts, 1, 2) },
		"/dev/pts before dev": func(c *specs.Spec) { c.Mounts[1], c.Mounts[2] = c.Mounts[2], c.Mounts[1] },
	} {
		c := base()
		mutate(c)
		if err := checkInvariants(c); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}

// TestCheckCwd: working directories resolved through the config's mounts.
func TestCheckCwd(t *testing.T) {
	rootfs, code := t.TempDir(), t.TempDir()
	for _, d := range []string{"srv/app", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(code, "sub"), 0o755)
	os.WriteFile(filepath.Join(code, "file"), nil, 0o644)
	os.Symlink("sub", filepath.Join(code, "link"))
	cfg := Config(Spec{Rootfs: rootfs, CodeDir: code, DataDir: t.TempDir(), Args: []string{"true"}}, t.TempDir(), "dotlab-x", false)
	for cwd, ok := range map[string]bool{
		"/work/code": true, "/work/code/sub": true, "/work/data": true, "/work/out": true, "/tmp": true,
		"/work": true, "/srv/app": true, "/": true,
		"/work/code/link": false, "/work/code/file": false, "/work/code/nope": false, "/tmp/x": false,
		"/work/out/x": false, "/proc": false, "/proc/self/fd/7": false, "/sys/fs": false, "/dev/shm": false,
		"/srv/app/": false, "/srv/../etc": false, "work/code": false, "/opt": false,
	} {
		cfg.Process.Cwd = cwd
		err := checkCwd(cfg)
		if ok != (err == nil) || (err != nil && !errors.Is(err, ErrUnsafeSpec)) {
			t.Errorf("%q: %v (want ok=%v)", cwd, err, ok)
		}
	}
}

// TestNamedOwnerAgreesWithDpkgSearch: the fast path (the package named
// like the binary, by its file list) finds what `dpkg-query -S` finds for
// the runtime installed here, and nothing for a path its list lacks.
func TestNamedOwnerAgreesWithDpkgSearch(t *testing.T) {
	dq, err := exec.LookPath("dpkg-query")
	bin, lerr := exec.LookPath("runc")
	if err != nil || lerr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must have dpkg-query and Debian's runc: %v %v", err, lerr)
		}
		t.Skip("needs dpkg-query and runc")
	}
	real, _ := filepath.EvalSymlinks(bin)
	ctx := context.Background()
	pkg, ver, ok := namedOwner(ctx, dq, real)
	out, serr := probe(ctx, dq, "-S", real)
	if serr != nil || !ok || !strings.HasPrefix(string(out), pkg+": ") || ver == "" {
		t.Fatalf("namedOwner(%s) = %q %q %v; dpkg-query -S says %q (%v)", real, pkg, ver, ok, out, serr)
	}
	if _, _, ok := namedOwner(ctx, dq, filepath.Join(filepath.Dir(real), "runc-not-in-its-list")); ok {
		t.Fatal("a path missing from the package's file list was owned")
	}
}
