// Package testfix holds fixtures shared by the runner-side tests: a tiny
// busybox root filesystem, and the project's rule for tests that need root or
// a tool (skip outside CI, fail in CI, where everything must be installed).
package testfix

import (
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"io"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Applets are the busybox applets linked into the fixture rootfs.
var applets = []string{
	"sh", "cat", "echo", "printf", "true", "false", "sleep", "ls", "mkdir", "rm", "ln", "dd",
	"wc", "env", "id", "sha256sum", "head", "tail", "awk", "sed", "grep", "test", "touch",
	"wget", "nc", "nslookup", "ping", "yes", "seq", "tr", "cut", "stat", "readlink", "mkfifo",
	"timeout", "cp", "kill", "ps", "unshare", "mount",
}

// Need skips the test when a requirement is missing, except in CI (CI=true),
// where a missing requirement is a failure: CI installs runc, runsc and
// busybox-static and runs as root.
func Need(t testing.TB, root bool, tools ...string) {
	t.Helper()
	miss := func(what string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must provide %s", what)
		}
		t.Skipf("needs %s", what)
	}
	if root && os.Geteuid() != 0 {
		miss("root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			miss(tool + " (Debian package " + debianPackage(tool) + ")")
		}
	}
}

func debianPackage(tool string) string {
	switch tool {
	case "busybox":
		return "busybox-static"
	case "Rscript":
		return "r-base-core"
	}
	return tool
}

// BusyboxRootfs writes a minimal root filesystem under a new temporary
// directory and returns it: /bin/busybox (the host's static busybox) with
// applet symlinks, /etc/passwd and /etc/group naming uid/gid 1000 "dotlab",
// and /tmp with mode 1777 (docs/sandbox.md "Isolation settings").
func BusyboxRootfs(t testing.TB) string {
	t.Helper()
	Need(t, false, "busybox")
	bb, _ := exec.LookPath("busybox")
	dir := t.TempDir()
	for _, d := range []string{"bin", "etc", "tmp", "work"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bb, filepath.Join(dir, "bin", "busybox"), 0o755)
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\ndotlab:x:1000:1000:dotlab:/tmp:/bin/sh\n")
	write("etc/group", "root:x:0:\ndotlab:x:1000:\n")
	return dir
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

// GitHTTP serves the git repositories under root with git's own smart-HTTP
// CGI (git http-backend) on loopback, as a forge would, until the test ends,
// and returns the base URL. Without git it skips, or fails under CI.
func GitHTTP(t testing.TB, root string) string {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must provide git")
		}
		t.Skip("needs git")
	}
	h := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, Stderr: io.Discard}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Commit writes files (name → content, parent directories created) into
// the worktree of r at dir, adds them and commits them with a fixed author
// and time, returning the commit id.
func Commit(t testing.TB, r *git.Repository, dir string, files map[string]string) string {
	t.Helper()
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.org", When: time.Unix(1e9, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}
