package cluster

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// HAProxyBin is where Debian's haproxy package installs the balancer.
const HAProxyBin = "/usr/sbin/haproxy"

// HAProxy is one haproxy process in front of Servers: round robin, an HTTP
// health check on GET /readyz every 500 ms, each given 2.5 s (readyz's own
// database checks take up to server.ReadyTimeout, 2 s: a loaded server is
// slow, not down; one that refuses connections fails at once), down after
// 3 failures, up after 2 successes, a failed connection retried on another server
// (`retries 3`, `option redispatch`: only connection failures, so a
// request a server received is never sent twice). Every request is logged
// to its stdout (LogPath) as one line:
//
//	dotlab-http STATUS METHOD PATH SERVER TOTAL_MS TERMINATION ACCEPTED_UNIX.MS
type HAProxy struct {
	Bin     string
	Addr    string // the frontend, HOST:PORT
	Servers []*Server
	Dir     string // config, stats socket, log

	cmd  *exec.Cmd
	done chan struct{}
}

// LogPath is the haproxy process's stdout and stderr: the request log.
func (h *HAProxy) LogPath() string { return filepath.Join(h.Dir, "haproxy.log") }

func (h *HAProxy) configPath() string { return filepath.Join(h.Dir, "haproxy.cfg") }
func (h *HAProxy) socketPath() string { return filepath.Join(h.Dir, "haproxy.sock") }

// URL is the frontend's base URL.
func (h *HAProxy) URL() string { return "http://" + h.Addr }

var haproxyConfig = template.Must(template.New("cfg").Parse(`global
{{if .Log}}    log stdout format raw local0
{{end}}    stats socket {{.Socket}} mode 600 level admin
    maxconn 8192
defaults
    mode http
    log global
    log-format "dotlab-http %ST %HM %HP %s %Tt %tsc %Ts.%ms"
    timeout connect 2s
    timeout client 5m
    timeout server 5m
    timeout http-request 30s
    timeout queue 1m
    retries 3
    option redispatch
frontend api
    bind {{.Addr}}
    default_backend dotlab
backend dotlab
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    timeout check 2500ms
    default-server inter 500ms fastinter 200ms downinter 500ms fall 3 rise 2
{{range .Servers}}    server {{.Name}} {{.Addr}} check
{{end}}`))

// HAProxyOptions change the configuration.
type HAProxyOptions struct {
	// NoRequestLog leaves the request log out (benchmarks measuring the
	// balancer's own cost); Requests then finds nothing.
	NoRequestLog bool
}

// StartHAProxy writes the configuration into dir, starts haproxy in the
// foreground and waits until it sees every server up.
func StartHAProxy(ctx context.Context, bin, dir string, servers []*Server, opt HAProxyOptions) (*HAProxy, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	h := &HAProxy{Bin: bin, Addr: addr, Servers: servers, Dir: dir}
	f, err := os.Create(h.configPath())
	if err != nil {
		return nil, err
	}
	err = haproxyConfig.Execute(f, map[string]any{"Socket": h.socketPath(), "Addr": addr, "Servers": servers, "Log": !opt.NoRequestLog})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command(bin, "-c", "-q", "-f", h.configPath()).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c: %w\n%s", err, out)
	}
	log, err := os.Create(h.LogPath())
	if err != nil {
		return nil, err
	}
	h.cmd = exec.Command(bin, "-db", "-f", h.configPath())
	h.cmd.Stdout, h.cmd.Stderr = log, log
	if err := h.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	h.done = make(chan struct{})
	go func() { h.cmd.Wait(); log.Close(); close(h.done) }()
	if err := h.WaitUp(ctx, len(servers)); err != nil {
		h.Stop()
		return nil, fmt.Errorf("haproxy: %w\n%s", err, Tail(h.LogPath(), 20))
	}
	return h, nil
}

// Stop ends haproxy (SIGTERM: it stops at once).
func (h *HAProxy) Stop() {
	if h.cmd == nil {
		return
	}
	h.cmd.Process.Signal(os.Interrupt)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
}

// WaitUp waits until haproxy reports n servers of the backend UP.
func (h *HAProxy) WaitUp(ctx context.Context, n int) error {
	for {
		st, err := h.Status()
		up := 0
		for _, s := range st {
			if s == "UP" {
				up++
			}
		}
		if err == nil && up >= n {
			return nil
		}
		select {
		case <-h.done:
			return errors.New("haproxy exited")
		case <-ctx.Done():
			return fmt.Errorf("%d of %d servers up (%v, %v): %w", up, n, st, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Status asks the stats socket for the backend's servers: name → status
// (UP, DOWN, "UP 1/2", …).
func (h *HAProxy) Status() (map[string]string, error) {
	c, err := net.DialTimeout("unix", h.socketPath(), time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(b), "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("show stat: %v %q", err, b)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	out := map[string]string{}
	for _, row := range rows[1:] {
		if len(row) > col["status"] && row[col["pxname"]] == "dotlab" && row[col["svname"]] != "BACKEND" {
			out[row[col["svname"]]] = row[col["status"]]
		}
	}
	return out, nil
}

// Request is one line of the request log.
type Request struct {
	Status      int // -1 when haproxy sent no response (e.g. the client left)
	Method      string
	Path        string
	Server      string // the backend server's name, <NOSRV> when none
	Total       time.Duration
	Termination string    // haproxy's termination state, "----" for a normal end
	Accepted    time.Time // when haproxy accepted the request (ms)
}

// Requests reads the request log so far.
func (h *HAProxy) Requests() ([]Request, error) {
	f, err := os.Open(h.LogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 8 || fs[0] != "dotlab-http" {
			continue
		}
		st, err1 := strconv.Atoi(fs[1])
		ms, err2 := strconv.Atoi(fs[5])
		sec, milli, _ := strings.Cut(fs[7], ".")
		s, err3 := strconv.ParseInt(sec, 10, 64)
		m, err4 := strconv.ParseInt(milli, 10, 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("request log line %q: %w", sc.Text(), err)
		}
		out = append(out, Request{Status: st, Method: fs[2], Path: fs[3], Server: fs[4], Total: time.Duration(ms) * time.Millisecond,
			Termination: fs[6], Accepted: time.UnixMilli(s*1000 + m)})
	}
	return out, sc.Err()
}

// MaxInFlight is the largest number of the logged requests with method and
// path (prefix) that haproxy held at one moment (from each request's accept
// time and total time, to the millisecond).
func MaxInFlight(reqs []Request, method, pathPrefix string) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range reqs {
		if r.Method == method && strings.HasPrefix(r.Path, pathPrefix) {
			edges = append(edges, edge{r.Accepted, 1}, edge{r.Accepted.Add(r.Total + time.Millisecond), -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same instant
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}
