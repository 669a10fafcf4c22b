package testfix

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GitDaemon serves the repositories under root with git's own `git daemon`
// (the git:// protocol, upload-pack only, every repository exported) on a
// free loopback port until the test ends, and returns the base URL
// ("git://127.0.0.1:PORT"). Without git it skips, or fails under CI.
func GitDaemon(t testing.TB, root string) string {
	t.Helper()
	Need(t, false, "git")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A file, not a pipe, for its messages: the daemon's upload-pack
	// children inherit it, and a pipe would keep Wait waiting for them.
	logFile, err := os.CreateTemp(t.TempDir(), "git-daemon-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--base-path="+root, "--export-all", "--informative-errors", "--timeout=30", root)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the daemon and its upload-pack children
		cmd.Wait()
		logFile.Close()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			msg, _ := os.ReadFile(logFile.Name())
			t.Fatalf("git daemon did not listen on %s: %s", addr, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "git://" + addr
}

// Git runs git with args in dir (the author and committer fixed, no
// user or system config) and returns its trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_AUTHOR_DATE=2001-09-09T01:46:40Z",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org", "GIT_COMMITTER_DATE=2001-09-09T01:46:40Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// LooseObject is the path of object id's loose file in the git directory gitDir.
func LooseObject(gitDir, id string) string {
	return filepath.Join(gitDir, "objects", id[:2], id[2:])
}
