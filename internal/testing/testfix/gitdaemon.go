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

// BrokenHistory makes, under root, bare repositories NAME.git holding three
// commits: the first adds history.txt, the second (the one a manifest
// pins) removes it and sets run.sh to pinnedRun, the third changes run.sh again.
// With broken set, history.txt's blob is then deleted from the bare
// repository's object store, as on a mirror that lost old objects: the
// pinned commit's tree is complete, its history is not. allowAny sets
// uploadpack.allowAnySHA1InWant, so the server hands out commits by id.
// It returns the pinned and tip commits.
func BrokenHistory(t testing.TB, root, name, pinnedRun string, broken, allowAny bool) (pinned, tip string) {
	t.Helper()
	src := filepath.Join(root, name+"-src")
	os.MkdirAll(src, 0o755)
	Git(t, src, "init", "-q", "-b", "main")
	write := func(file, body string) {
		if err := os.WriteFile(filepath.Join(src, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("history.txt", "an old data file, later removed\n")
	write("run.sh", "echo v1\n")
	Git(t, src, "add", ".")
	Git(t, src, "commit", "-q", "-m", "first")
	lost := Git(t, src, "rev-parse", "HEAD:history.txt")
	Git(t, src, "rm", "-q", "history.txt")
	write("run.sh", pinnedRun)
	Git(t, src, "commit", "-q", "-am", "pinned")
	pinned = Git(t, src, "rev-parse", "HEAD")
	write("run.sh", "echo v3\n")
	Git(t, src, "commit", "-q", "-am", "tip")
	tip = Git(t, src, "rev-parse", "HEAD")

	bare := filepath.Join(root, name+".git")
	Git(t, root, "init", "-q", "--bare", bare)
	// Few objects: receive-pack stores them loose (receive.unpackLimit), one file each.
	Git(t, src, "push", "-q", bare, "main")
	if allowAny {
		Git(t, bare, "config", "uploadpack.allowAnySHA1InWant", "true")
	}
	if broken {
		if err := os.Remove(LooseObject(bare, lost)); err != nil {
			t.Fatalf("deleting the old blob: %v", err)
		}
		// The repository is really broken: git itself cannot clone it.
		if out, err := exec.Command("git", "clone", "-q", "--no-local", bare, filepath.Join(root, name+"-clone")).CombinedOutput(); err == nil {
			t.Fatalf("a full clone of the broken repository succeeded:\n%s", out)
		}
	}
	return pinned, tip
}
