package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/internal/testing/testimage"
	"github.com/dotlab/dotlab/sandbox"
)

// env is one busybox rootfs plus code and data directories shared by the tests.
type env struct {
	rootfs, code, data string
}

func setup(t *testing.T, runtime string) (sandbox.Runtime, env) {
	t.Helper()
	testfix.Need(t, true, runtime, "busybox")
	store, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, rootfs := testimage.Busybox(t, store, "test/busybox")
	e := env{rootfs: rootfs, code: t.TempDir(), data: t.TempDir()}
	os.WriteFile(filepath.Join(e.code, "run.sh"), []byte("echo from code\n"), 0o644)
	os.WriteFile(filepath.Join(e.data, "input.csv"), []byte("a,b\n1,2\n"), 0o644)
	for _, d := range []string{e.code, e.data} {
		// World-writable on the host: only the read-only mounts stop writes.
		os.Chmod(d, 0o777)
	}
	return sandbox.Runtime{Name: runtime, StateDir: filepath.Join(t.TempDir(), "state")}, e
}

type outcome struct {
	res            *sandbox.Result
	stdout, stderr string
	out            string
}

func run(t *testing.T, rt sandbox.Runtime, e env, limits sandbox.Limits, script string) outcome {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	spec := sandbox.Spec{
		Rootfs: e.rootfs, CodeDir: e.code, DataDir: e.data,
		Args:     []string{"/bin/sh", "-c", script},
		ImageEnv: []string{imagestore.DefaultPath},
		Limits:   limits,
	}
	res, err := rt.Run(context.Background(), spec, out, sandbox.IO{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("sandbox error: %v", err)
	}
	if left := rt.Leftovers(res.ID); len(left) > 0 {
		t.Fatalf("run left things behind: %v", left)
	}
	t.Logf("exit=%d timeout=%v oom=%v dur=%v\nstdout: %s\nstderr: %s", res.ExitCode, res.TimedOut, res.OOMKilled, res.Duration, stdout.String(), stderr.String())
	return outcome{res: res, stdout: stdout.String(), stderr: stderr.String(), out: out}
}

var small = sandbox.Limits{TimeoutSeconds: 20, MemoryBytes: 128 << 20, Pids: 64, OutputBytes: 16 << 20}

func TestContract(t *testing.T) {
	rt, e := setup(t, "runc")
	o := run(t, rt, e, small, `
set -e
echo "uid=$(id -u) gid=$(id -g) cwd=$(pwd)"
cat input.csv 2>/dev/null || cat "$DOTLAB_DATA_DIR/input.csv"
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
ls -ld /tmp
echo '{"x": 1}' > "$DOTLAB_OUT_DIR/results.json"
mkdir "$DOTLAB_OUT_DIR/sub" && echo hi > "$DOTLAB_OUT_DIR/sub/f.txt"
`)
	if o.res.ExitCode != 0 || o.res.OOMKilled || o.res.TimedOut {
		t.Fatalf("clean run reported %+v", o.res)
	}
	for _, want := range []string{"uid=1590000 gid=1590000 cwd=/work/code", "a,b", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "drwxrwxrwt"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if len(o.res.Files) != 2 || o.res.Files[0].Path != "results.json" || o.res.Files[1].Path != "sub/f.txt" {
		t.Fatalf("files: %+v", o.res.Files)
	}
	if data, _ := os.ReadFile(filepath.Join(o.out, "results.json")); string(data) != "{\"x\": 1}\n" {
		t.Fatalf("results.json copied as %q", data)
	}
}

func TestHostileNetwork(t *testing.T) {
	rt, e := setup(t, "runc")
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	hostIP := "127.0.0.1"
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				hostIP = ipn.IP.String()
				break
			}
		}
	}
	o := run(t, rt, e, small, fmt.Sprintf(`
echo interfaces: $(ls /sys/class/net)
echo routes: $(tail -n +2 /proc/net/route | wc -l)
nc -w 2 127.0.0.1 %[1]d </dev/null && echo REACHED-LOOPBACK
nc -w 2 %[2]s %[1]d </dev/null && echo REACHED-HOST
nslookup example.org && echo RESOLVED
true`, port, hostIP))
	for _, bad := range []string{"REACHED", "RESOLVED"} {
		if strings.Contains(o.stdout, bad) {
			t.Errorf("network escape: %s", bad)
		}
	}
	if !strings.Contains(o.stdout, "interfaces: lo\n") || !strings.Contains(o.stdout, "routes: 0") {
		t.Errorf("want loopback only and no routes, got %q", o.stdout)
	}
	if accepted.Load() != 0 {
		t.Errorf("the host listener accepted %d connections", accepted.Load())
	}
}

func TestHostileWrites(t *testing.T) {
	rt, e := setup(t, "runc")
	o := run(t, rt, e, small, `
touch /work/code/x && echo WROTE-CODE
echo y >> /work/code/run.sh && echo WROTE-CODE2
touch /work/data/x && echo WROTE-DATA
touch /x && echo WROTE-ROOT
touch /etc/x && echo WROTE-ETC
cp /bin/busybox /work/out/bb && /work/out/bb true && echo EXEC-OUT
cp /bin/busybox /tmp/bb && echo TMP-OK
unshare -U true && echo UNSHARED
mount -t tmpfs none /tmp && echo MOUNTED
true`)
	for _, bad := range []string{"WROTE", "EXEC-OUT", "UNSHARED", "MOUNTED"} {
		if strings.Contains(o.stdout, bad) {
			t.Errorf("sandbox allowed %s", bad)
		}
	}
	if !strings.Contains(o.stdout, "TMP-OK") {
		t.Errorf("/tmp is not writable")
	}
	if data, _ := os.ReadFile(filepath.Join(e.code, "run.sh")); string(data) != "echo from code\n" {
		t.Errorf("code changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(e.rootfs, "x")); err == nil {
		t.Errorf("rootfs written")
	}
}

func TestHostileSymlinksInOut(t *testing.T) {
	rt, e := setup(t, "runc")
	o := run(t, rt, e, small, `
cd "$DOTLAB_OUT_DIR"
echo 1 > real.txt
ln -s /etc/passwd results.json
ln -s real.txt inside
mkfifo pipe
`)
	got := map[string]string{}
	for _, r := range o.res.Rejected {
		got[r.Path] = r.Type
	}
	if got["results.json"] != "symlink" || got["inside"] != "symlink" || got["pipe"] != "fifo" {
		t.Fatalf("rejected: %+v", o.res.Rejected)
	}
	if len(o.res.Files) != 1 || o.res.Files[0].Path != "real.txt" {
		t.Fatalf("files: %+v", o.res.Files)
	}
	if _, err := os.Lstat(filepath.Join(o.out, "results.json")); err == nil {
		t.Fatalf("a symlink reached the out directory")
	}
}

func TestHostileForkBomb(t *testing.T) {
	rt, e := setup(t, "runc")
	l := small
	l.TimeoutSeconds = 3
	o := run(t, rt, e, l, `bomb() { bomb | bomb & }; bomb; sleep 60`)
	if !o.res.TimedOut && o.res.ExitCode == 0 {
		t.Fatalf("fork bomb finished cleanly?")
	}
}

func TestHostileMemoryHog(t *testing.T) {
	rt, e := setup(t, "runc")
	l := small
	l.MemoryBytes = 64 << 20
	o := run(t, rt, e, l, `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo survived ${#x}`)
	if !o.res.OOMKilled || strings.Contains(o.stdout, "survived") {
		t.Fatalf("memory hog not OOM-killed: %+v", o.res)
	}
}

func TestHostileInfiniteLoop(t *testing.T) {
	rt, e := setup(t, "runc")
	l := small
	l.TimeoutSeconds = 2
	o := run(t, rt, e, l, `trap '' TERM INT; while :; do :; done`)
	if !o.res.TimedOut || o.res.ExitCode == 0 {
		t.Fatalf("loop not stopped by the timeout: %+v", o.res)
	}
}

func TestHostileHostSecrets(t *testing.T) {
	rt, e := setup(t, "runc")
	t.Setenv("DOTLAB_TEST_SECRET", "s3cr3t-value")
	o := run(t, rt, e, small, `
env | sort
cat /proc/1/environ | tr '\0' '\n'
cat /etc/shadow /root/.ssh/id_rsa /proc/1/root/etc/shadow 2>&1 | head -c 200
ls /sys/fs/cgroup/memory/ | head -3
true`)
	if strings.Contains(o.stdout, "s3cr3t-value") {
		t.Fatal("host environment leaked into the sandbox")
	}
	for _, want := range []string{"DOTLAB_DATA_DIR=/work/data", "DOTLAB_OUT_DIR=/work/out", "HOME=/tmp"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}

func TestHostileHugeOutput(t *testing.T) {
	rt, e := setup(t, "runc")
	l := small
	l.OutputBytes = 8 << 20
	o := run(t, rt, e, l, `dd if=/dev/zero of="$DOTLAB_OUT_DIR/big" bs=1M count=100; i=0; while [ $i -lt 100 ]; do echo x > "$DOTLAB_OUT_DIR/f$i" || break; i=$((i+1)); done; echo '{}' > "$DOTLAB_OUT_DIR/results.json"; exit 0`)
	var total int64
	for _, f := range o.res.Files {
		total += f.Size
	}
	if total > 8<<20 {
		t.Fatalf("out holds %d bytes, cap is %d", total, 8<<20)
	}
	if !o.res.OutputFull && o.res.ExitCode == 0 {
		t.Fatalf("huge output not stopped: %+v", o.res)
	}
}

func TestRunsc(t *testing.T) {
	rt, e := setup(t, "runsc")
	o := run(t, rt, e, small, `
echo "uid=$(id -u)"
echo routes: $(tail -n +2 /proc/net/route 2>/dev/null | wc -l)
touch /work/code/x && echo WROTE-CODE
touch /work/data/x && echo WROTE-DATA
echo '{"x": 2}' > "$DOTLAB_OUT_DIR/results.json"
ln -s /etc/passwd "$DOTLAB_OUT_DIR/evil"`)
	if o.res.ExitCode != 0 || !strings.Contains(o.stdout, "uid=1590000") || strings.Contains(o.stdout, "WROTE") {
		t.Fatalf("runsc run: %+v\n%s", o.res, o.stdout)
	}
	if len(o.res.Files) != 1 || len(o.res.Rejected) != 1 {
		t.Fatalf("runsc outputs: files %+v rejected %+v", o.res.Files, o.res.Rejected)
	}
}

// TestReapAfterOwnerKilled: the dotlab process running a container is killed
// with SIGKILL (it cannot clean up); the container keeps running. The next
// Run (here: Reap directly) kills and deletes it and removes its cgroups,
// out tmpfs and bundle.
func TestReapAfterOwnerKilled(t *testing.T) {
	if os.Getenv("DOTLAB_REAP_CHILD") == "1" {
		// The owner process: run a long container, to be killed by the parent.
		rt := sandbox.Runtime{Name: "runc", StateDir: os.Getenv("DOTLAB_REAP_STATE")}
		spec := sandbox.Spec{Rootfs: os.Getenv("DOTLAB_REAP_ROOTFS"), CodeDir: os.Getenv("DOTLAB_REAP_CODE"), DataDir: os.Getenv("DOTLAB_REAP_DATA"),
			Args: []string{"/bin/sh", "-c", "sleep 600"}, ImageEnv: []string{imagestore.DefaultPath}, Limits: small}
		rt.Run(context.Background(), spec, t.TempDir(), sandbox.IO{})
		return
	}
	rt, e := setup(t, "runc")
	child := exec.Command(os.Args[0], "-test.run=^TestReapAfterOwnerKilled$")
	child.Env = append(os.Environ(), "DOTLAB_REAP_CHILD=1", "DOTLAB_REAP_STATE="+rt.StateDir,
		"DOTLAB_REAP_ROOTFS="+e.rootfs, "DOTLAB_REAP_CODE="+e.code, "DOTLAB_REAP_DATA="+e.data)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	owners := rt.StateDir + ".owners"
	var id string
	deadline := time.Now().Add(30 * time.Second)
	for id == "" || !exists(filepath.Join(rt.StateDir, id)) {
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatal("the child's container never started")
		}
		if es, _ := os.ReadDir(owners); len(es) == 1 {
			id = strings.TrimSuffix(es[0].Name(), ".json")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	child.Process.Kill() // SIGKILL: no cleanup in the owner
	child.Wait()
	if left := rt.Leftovers(id); len(left) == 0 {
		t.Fatal("expected the orphaned container to be left behind before reaping")
	}
	reaped := rt.Reap()
	if len(reaped) != 1 || reaped[0] != id {
		t.Fatalf("reaped %v, want [%s]", reaped, id)
	}
	if left := rt.Leftovers(id); len(left) > 0 {
		t.Fatalf("left behind after reaping: %v", left)
	}
	if es, _ := os.ReadDir(owners); len(es) != 0 {
		t.Fatalf("owner records remain: %v", es)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
