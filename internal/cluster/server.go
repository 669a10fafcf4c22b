// Package cluster runs DotLab as an operator would, with real OS
// processes: `dotlab serve` processes on one database (Server) behind a
// real HAProxy (HAProxy), each started, killed with SIGKILL and restarted
// on the same address. The multi-process tests of package cluster (issue
// #15 "Must show") and bench/api's balancer rows use it. Every function
// returns its errors; nothing here depends on package testing.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Build compiles the dotlab command (github.com/dotlab/dotlab/cmd/dotlab,
// from the module the current directory is in) into dir and returns the
// binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "dotlab")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/dotlab/dotlab/cmd/dotlab").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr returns "127.0.0.1:PORT" with a port that was free when asked
// (another process may take it before it is used; the callers bind at once).
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Server is one `dotlab serve` process. Its address is fixed when it is
// made, so that a restart after Kill listens where the balancer expects it.
// Its stdout and stderr go to LogPath, appended across restarts.
type Server struct {
	Name    string   // names the log file and the balancer's server line
	Bin     string   // the dotlab binary
	DB      string   // --db
	Addr    string   // --addr, HOST:PORT
	Args    []string // more serve flags (windows, rate limits, …)
	LogPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// NewServer makes (but does not start) server name on a free loopback
// port, logging to dir/name.log.
func NewServer(name, bin, db, dir string, args ...string) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	return &Server{Name: name, Bin: bin, DB: db, Addr: addr, Args: args, LogPath: filepath.Join(dir, name+".log")}, nil
}

// URL is the server's base URL, http://HOST:PORT.
func (s *Server) URL() string { return "http://" + s.Addr }

// Start starts the process and waits until GET /readyz answers
// 200, the process exits, or ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if s.cmd != nil && !s.exited() {
		return fmt.Errorf("%s: already running", s.Name)
	}
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "==== start %s\n", time.Now().Format(time.RFC3339Nano))
	args := append([]string{"serve", "--addr", s.Addr, "--db", s.DB}, s.Args...)
	cmd := exec.Command(s.Bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(s.done) }()
	if err := WaitHealthy(ctx, s.URL(), s.done); err != nil {
		s.Kill()
		return fmt.Errorf("%s: %w\n%s", s.Name, err, Tail(s.LogPath, 20))
	}
	return nil
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL) }

// Stop sends SIGTERM (a graceful shutdown) and waits up to a minute, then
// kills.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil || s.exited() {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s: still running a minute after %v: killed", s.Name, sig)
	}
}

// Running reports whether the process is up.
func (s *Server) Running() bool { return s.cmd != nil && !s.exited() }

func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// WaitHealthy polls GET base/readyz until it answers 200, exited is
// closed (the process ended: an error), or ctx ends.
func WaitHealthy(ctx context.Context, base string, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		res, err := hc.Get(base + "/readyz")
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("the process exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Tail returns the last n lines of the file at path (for error messages).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
