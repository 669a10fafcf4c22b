package runner_test

// The hostile-input battery (issue #10): end-to-end reruns of manifests a
// stranger could list, each asserting the outcome the protocol names and
// that the runner's host is untouched (no file outside the job folder, no
// connection to a canary listener, bounded disk use, no container or mount
// left behind). Package-level tests of the same mechanisms live beside
// them (sandbox/collect_test.go, imagestore, leakcheck, internal/netpolicy).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// canary is a TCP listener on loopback that counts connections: a test
// points a hostile URL at it and asserts nobody ever called.
type canary struct {
	ln    net.Listener
	calls atomic.Int32
}

func newCanary(t *testing.T) *canary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &canary{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.calls.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *canary) addr() string { return c.ln.Addr().String() }

func (c *canary) assertUntouched(t *testing.T) {
	t.Helper()
	if n := c.calls.Load(); n > 0 {
		t.Fatalf("the canary listener at %s got %d connection(s)", c.addr(), n)
	}
}

// hostUntouched asserts that no mount and no container state names a
// DotLab run any more, and that the sentinel file is as it was.
func hostUntouched(t *testing.T, r *runner.Runner, sentinel string, want []byte) {
	t.Helper()
	// Only this runner's bundles count: other packages' tests may be
	// running containers at the same time.
	if r.Runtime.BundleDir == "" {
		t.Fatal("hostUntouched needs a runner with its own Runtime.BundleDir")
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, r.Runtime.BundleDir) {
			t.Errorf("mount left behind: %s", line)
		}
	}
	if entries, _ := os.ReadDir(r.Runtime.BundleDir); len(entries) > 0 {
		t.Errorf("%d bundle(s) left behind in %s", len(entries), r.Runtime.BundleDir)
	}
	if r.Runtime.StateDir != "" {
		if entries, _ := os.ReadDir(r.Runtime.StateDir); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("container state left behind: %v", names)
		}
	}
	if sentinel != "" {
		got, err := os.ReadFile(sentinel)
		if err != nil || string(got) != string(want) {
			t.Errorf("sentinel %s changed: %q %v", sentinel, got, err)
		}
	}
}

// trickle serves one byte per interval, forever (until the client leaves).
func trickle(interval time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(interval):
			}
		}
	}
}

// steady serves an endless body at about rate bytes/s (no Content-Length).
func steady(rate int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, rate/10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// TestHostileSlowDownloads (kind 4): a server that trickles one byte per
// interval is cut off by the stall rule, and one that streams steadily but
// never ends is cut off by the run's fetch budget; both are spec_issue
// (the claim cannot be fetched as written) and return promptly.
func TestHostileSlowDownloads(t *testing.T) {
	f := newFixture(t)
	slow := httptest.NewServer(trickle(50 * time.Millisecond))
	defer slow.Close()
	endless := httptest.NewServer(steady(256 << 10))
	defer endless.Close()

	t.Run("stall", func(t *testing.T) {
		r := f.fresh(t, runner.Policy{AllowPrivate: true, MinRate: 1024, StallWindow: time.Second})
		start := time.Now()
		rec, _ := mustRerun(t, r, f.manifest(slow.URL+"/data.csv", meanScript), dotlab.OutcomeSpecIssue, "stalled", "bytes/s")
		if el := time.Since(start); el > 15*time.Second {
			t.Fatalf("stall took %s to stop", el)
		}
		if len(rec.Body.Comparisons) != 0 {
			t.Fatalf("comparisons on an unfetchable input: %+v", rec.Body.Comparisons)
		}
	})
	t.Run("budget", func(t *testing.T) {
		r := f.fresh(t, runner.Policy{AllowPrivate: true, MinRate: 1024, StallWindow: time.Second, Timeout: 3 * time.Second})
		start := time.Now()
		mustRerun(t, r, f.manifest(endless.URL+"/data.csv", meanScript), dotlab.OutcomeSpecIssue, "fetch budget")
		if el := time.Since(start); el > 15*time.Second {
			t.Fatalf("budget took %s to stop", el)
		}
	})
	t.Run("cancelled is no outcome", func(t *testing.T) {
		r := f.fresh(t, runner.Policy{AllowPrivate: true})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := r.Rerun(ctx, f.manifest(slow.URL+"/data.csv", meanScript), t.TempDir())
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a cancelled run must give no outcome, got %v", err)
		}
	})
}

// TestHostileLocalFiles (kind 3): local files are refused unless the
// runner names a local root, and never read outside it: not by absolute
// path, `..` or a symlink inside the root. The refusal prints no hash of
// the file it did not read, and a verified local file lands in the cache
// readable by the sandbox's group only.
func TestHostileLocalFiles(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	good := filepath.Join(root, "data.csv")
	os.WriteFile(good, f.data, 0o600)
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)

	mustRerun(t, f.fresh(t, runner.Policy{AllowPrivate: true}), f.manifest("file://"+good, meanScript), dotlab.OutcomeSpecIssue, "--allow-local")
	mustRerun(t, f.fresh(t, runner.Policy{AllowPrivate: true}), f.manifest(good, meanScript), dotlab.OutcomeSpecIssue, "--allow-local")

	local := runner.Policy{AllowPrivate: true, LocalRoot: root}
	for _, u := range []string{"file:///etc/passwd", "/etc/passwd", "file://" + root + "/../../etc/passwd", "file://" + root + "/link", "sub/../../etc/passwd", "file://otherhost/etc/passwd"} {
		rec, out := mustRerun(t, f.fresh(t, local), f.manifest(u, meanScript), dotlab.OutcomeSpecIssue, "refused")
		logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
		passwd, _ := os.ReadFile("/etc/passwd")
		if sum := sha256Hex(passwd); strings.Contains(rec.Body.Notes+string(logs), sum) {
			t.Fatalf("%s: the hash of a file outside the root was printed", u)
		}
	}
	// The test's temporary directories (data and the local repository)
	// share one parent: name it as the local root.
	r := f.fresh(t, runner.Policy{AllowPrivate: true, LocalRoot: filepath.Dir(root)})
	rec, _ := mustRerun(t, r, f.manifest("file://"+good, meanScript), dotlab.OutcomeReproduced)
	fi, err := os.Stat(r.Cache.Path(rec.Body.InputHashes["data"]))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o007 != 0 || fi.Mode().Perm()&0o222 != 0 {
		t.Fatalf("cached local file has mode %v: world-readable or writable", fi.Mode().Perm())
	}
	hostUntouched(t, r, good, f.data)
}

// TestHostileManyOutputs (kind 1): outputs whose apparent sizes sum past
// the output limit (sparse files cost the tmpfs nothing) are refused as a
// whole: spec_issue naming the limit, nothing copied to the host.
func TestHostileManyOutputs(t *testing.T) {
	f := newFixture(t)
	r := f.fresh(t, runner.LocalPolicy("/"))
	r.OutputBytes = 16 << 20
	script := `for i in 1 2 3 4; do truncate -s 10M "$DOTLAB_OUT_DIR/s$i"; done; ` + meanScript
	_, out := mustRerun(t, r, f.manifest(f.fileURL(), script), dotlab.OutcomeSpecIssue, "output size limit", "nothing was copied out")
	var total int64
	filepath.Walk(filepath.Join(out, runner.OutSub), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	if total != 0 {
		t.Fatalf("%d bytes copied to the host", total)
	}
	hostUntouched(t, r, "", nil)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestRunRecordsRuntime (kind 10): every run's environment names the OCI
// runtime build that ran it, including the CVE fixes its package carries.
func TestRunRecordsRuntime(t *testing.T) {
	f := newFixture(t)
	rec, out := f.mustRerun(f.manifest(f.fileURL(), meanScript), dotlab.OutcomeReproduced)
	rt := rec.Body.Environment.Runtime
	if rt == nil || rt.Name != "runc" || rt.Version == "" {
		t.Fatalf("runtime not recorded: %+v", rt)
	}
	data, err := os.ReadFile(filepath.Join(out, runner.RunFile))
	if err != nil || !strings.Contains(string(data), `"runtime"`) || !strings.Contains(string(data), rt.Version) {
		t.Fatalf("run.json lacks the runtime: %s", data)
	}
	t.Logf("runtime: %+v", *rt)
}

// TestHostileResultsNumbers (kind 9): a results.json value outside the
// accepted range (docs/manifest-spec.md "Comparison") is malformed results,
// spec_issue naming the target and the bound, whatever way it is spelled.
func TestHostileResultsNumbers(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"1e400", "-1e400", "1e-400", "1" + strings.Repeat("0", 400)} {
		script := `echo '{"mean": ` + v + `, "n": 4}' > "$DOTLAB_OUT_DIR/results.json"`
		rec, _ := f.mustRerun(f.manifest(f.fileURL(), script), dotlab.OutcomeSpecIssue, "$.mean", "out of range")
		if len(rec.Body.Notes) > runner.MaxNotes+100 {
			t.Fatalf("%.20s: notes of %d bytes", v, len(rec.Body.Notes))
		}
	}
}

// TestHostileLocalTraps (adversarial review): inside --allow-local DIR, a
// FIFO must not block the runner (refused at once, not opened for
// reading), and a repository whose .git is a gitfile pointing outside DIR
// is refused (go-git would follow it and check out a repository the root
// does not contain).
func TestHostileLocalTraps(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustRerun(t, f.fresh(t, runner.Policy{AllowPrivate: true, LocalRoot: filepath.Dir(root)}), f.manifest("file://"+fifo, meanScript), dotlab.OutcomeSpecIssue, "not a regular file")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a FIFO inside the local root blocked the rerun")
	}

	outside, commit := repo(t, map[string]string{"run.sh": meanScript, "secret.txt": "topsecret"})
	inRoot := filepath.Join(root, "repo")
	os.MkdirAll(inRoot, 0o755)
	os.WriteFile(filepath.Join(inRoot, ".git"), []byte("gitdir: "+filepath.Join(outside, ".git")+"\n"), 0o644)
	data := filepath.Join(root, "data.csv")
	os.WriteFile(data, f.data, 0o644)
	m := f.manifest("file://"+data, meanScript)
	m.Code = dotlab.Code{Repository: inRoot, Commit: commit}
	// The root is the directory holding data and the gitfile repository
	// only; the repository the gitfile names lies outside it.
	rec, out := mustRerun(t, f.fresh(t, runner.Policy{AllowPrivate: true, LocalRoot: root}), m, dotlab.OutcomeSpecIssue, "outside --allow-local")
	logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
	if strings.Contains(string(logs)+rec.Body.Notes, "topsecret") {
		t.Fatal("the repository outside the root was checked out")
	}
}
