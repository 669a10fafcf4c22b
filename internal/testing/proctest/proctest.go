// Package proctest runs DotLab as real operating-system processes for
// tests: it builds the dotlab binary, starts `dotlab serve` processes on a
// database and waits until they are ready (GET /readyz), and starts HAProxy
// (Debian's /usr/sbin/haproxy) with a given configuration. Every process is
// stopped when its test ends. The multi-process, balancer and crash tests
// share these helpers (docs/deploy.md).
//
// A missing tool (go, haproxy) skips the test outside CI and fails it under
// CI=true, as the project's other tests do (internal/testing/testfix.Need).
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"github.com/dotlab/dotlab/internal/cluster"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Dotlab builds github.com/dotlab/dotlab/cmd/dotlab once per test process
// and returns the binary's path. The binary lives in a temporary directory
// that Main removes when the tests end.
func Dotlab(t testing.TB) string {
	t.Helper()
	testfix.Need(t, false, "go")
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "dotlab-proctest-")
		if buildErr != nil {
			return
		}
		buildBin, buildErr = cluster.Build(buildDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Main runs the tests of a package (call it from TestMain) and then removes
// the binary Dotlab built.
func Main(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// Proc is one running process with its combined stdout and stderr kept.
type Proc struct {
	Cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // Wait's error, once done is closed
}

// Start starts bin with args (env added to this process's environment) and
// stops it with SIGKILL when the test ends, if it is still running.
func Start(t testing.TB, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{out: &syncBuffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.out, p.out
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.Cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s %s output:\n%s", filepath.Base(bin), strings.Join(args, " "), p.Output())
		}
	})
	return p
}

// Output is what the process has written so far (stdout and stderr).
func (p *Proc) Output() string { return p.out.String() }

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 when a signal killed it); past timeout the test fails.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("the process did not exit within %s; output:\n%s", timeout, p.Output())
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("wait: %v", p.err)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Serve is one `dotlab serve` process.
type Serve struct {
	*Proc
	Addr string // HOST:PORT it listens on
	URL  string // http://Addr
}

// listening matches the server's start line (server.Run logs it).
var listening = regexp.MustCompile(`msg="dotlab serving" addr=(\S+)`)

// StartServe starts `dotlab serve --addr 127.0.0.1:0 --db dbURL args…` with
// the binary bin (Dotlab), learns its address from its log, and waits until
// GET /readyz answers 200 (at most a minute). args come after the defaults,
// so they may override them (a fixed --addr, other windows). The rate
// limits are off unless args set them: a test's clients all share one
// address.
func StartServe(t testing.TB, bin, dbURL string, args ...string) *Serve {
	t.Helper()
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", dbURL, "--rate-agent", "0", "--rate-anon", "0"}, args...)
	s := &Serve{Proc: Start(t, nil, bin, all...)}
	deadline := time.Now().Add(time.Minute)
	for s.Addr == "" {
		if m := listening.FindStringSubmatch(s.Output()); m != nil {
			s.Addr = m[1]
			break
		}
		if s.Exited() || time.Now().After(deadline) {
			t.Fatalf("dotlab serve did not start; output:\n%s", s.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.URL = "http://" + s.Addr
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := cluster.WaitHealthy(ctx, s.URL, s.done); err != nil {
		t.Fatalf("dotlab serve at %s: %v; output:\n%s", s.Addr, err, s.Output())
	}
	return s
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (for
// configurations that must name a port, such as HAProxy's).
func FreePort(t testing.TB) int {
	t.Helper()
	addr, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// HAProxy is one haproxy process.
type HAProxy struct {
	*Proc
	Config string // the configuration file
}

// StartHAProxy checks config with `haproxy -c`, then runs haproxy in the
// foreground (-db) with it, and waits until addr (its frontend, HOST:PORT)
// accepts connections.
func StartHAProxy(t testing.TB, config, addr string) *HAProxy {
	t.Helper()
	testfix.Need(t, false, "haproxy")
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("haproxy", "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c rejects the configuration: %v\n%s\n%s", err, out, config)
	}
	h := &HAProxy{Proc: Start(t, nil, "haproxy", "-db", "-f", path), Config: path}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return h
		}
		if h.Exited() || time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s: %v; output:\n%s", addr, err, h.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CodeBlock returns the n-th (from 0) fenced code block of the markdown
// file at path whose info string is lang (```lang).
func CodeBlock(t testing.TB, path, lang string, n int) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cur *strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if n >= len(blocks) {
		t.Fatalf("%s has %d ```%s blocks, want block %d", path, len(blocks), lang, n)
	}
	return blocks[n]
}

// Get fetches url with a short timeout and returns its status and body.
func Get(ctx context.Context, c *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
