package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// result is one measured row: a rate, latency percentiles and errors.
type result struct {
	ops      int64 // requests, or write cycles
	errors   int64 // responses with an unexpected status, failed transactions
	elapsed  time.Duration
	p50, p99 time.Duration
	// perKind has p50 and p99 by request kind for rows that mix several.
	perKind []kindLatency
	note    string
}

type kindLatency struct {
	name     string
	p50, p99 time.Duration
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// percentiles sorts d and returns its 50th and 99th percentiles.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(p float64) time.Duration {
		i := int(p * float64(len(d)))
		return d[min(i, len(d)-1)]
	}
	return at(0.50), at(0.99)
}

// server serves h on a loopback port until stop is called.
type server struct {
	url  string
	srv  *http.Server
	done chan error
}

func serve(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The settings of `dotlab serve`.
	s := &server{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute},
		done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

func (s *server) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-s.done; err != http.ErrServerClosed {
		return err
	}
	return nil
}

// readLoad is the read load: conns keep-alive connections asking
// GET {base}/api/v1/claims/DL-nnnn for random n in [1, claims] for d.
type readLoad struct {
	wrk     string // path of wrk, or "" for the Go load generator
	conns   int
	threads int
	d       time.Duration
	claims  int
	tmp     string // directory for the Lua script
}

func (l readLoad) run(base string) (result, error) {
	if l.wrk != "" {
		return l.runWrk(base)
	}
	return l.runGo(base)
}

// wrkScript picks a random claim id per request; each wrk thread seeds its
// own generator.
const wrkScript = `local n = %d
init = function(args)
  local addr = tostring({}):match("0x(%%x+)") or "0"
  math.randomseed(os.time() + tonumber(addr:sub(-6), 16))
end
request = function()
  return wrk.format("GET", string.format("/api/v1/claims/DL-%%04d", math.random(1, n)))
end
`

func (l readLoad) runWrk(base string) (result, error) {
	script := filepath.Join(l.tmp, "claims.lua")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(wrkScript, l.claims)), 0o644); err != nil {
		return result{}, err
	}
	args := []string{"-t" + strconv.Itoa(l.threads), "-c" + strconv.Itoa(l.conns),
		"-d" + strconv.Itoa(int(l.d.Seconds())) + "s", "--latency", "-s", script, base}
	out, err := exec.Command(l.wrk, args...).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return parseWrk(string(out))
}

var (
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkTotal    = regexp.MustCompile(`(\d+) requests in ([0-9.]+)(us|ms|s|m),`)
	wrkPct      = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSockErrs = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func wrkDuration(v, unit string) time.Duration {
	f, _ := strconv.ParseFloat(v, 64)
	switch unit {
	case "us":
		return time.Duration(f * float64(time.Microsecond))
	case "ms":
		return time.Duration(f * float64(time.Millisecond))
	case "m":
		return time.Duration(f * float64(time.Minute))
	}
	return time.Duration(f * float64(time.Second))
}

// parseWrk reads the totals, the 50% and 99% latencies and the errors from
// wrk --latency output.
func parseWrk(out string) (result, error) {
	var r result
	t := wrkTotal.FindStringSubmatch(out)
	if t == nil || wrkRPS.FindStringSubmatch(out) == nil {
		return r, fmt.Errorf("cannot read wrk output:\n%s", out)
	}
	r.ops, _ = strconv.ParseInt(t[1], 10, 64)
	r.elapsed = wrkDuration(t[2], t[3])
	for _, m := range wrkPct.FindAllStringSubmatch(out, -1) {
		if m[1] == "50" {
			r.p50 = wrkDuration(m[2], m[3])
		} else {
			r.p99 = wrkDuration(m[2], m[3])
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.errors += n
	}
	if m := wrkSockErrs.FindStringSubmatch(out); m != nil {
		for _, v := range m[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			r.errors += n
		}
	}
	return r, nil
}

// runGo is the load generator used when wrk is missing: one goroutine per
// connection, each with its own keep-alive connection.
func (l readLoad) runGo(base string) (result, error) {
	deadline := time.Now().Add(l.d)
	lat := make([][]time.Duration, l.conns)
	errs := make([]int64, l.conns)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient()
			for time.Now().Before(deadline) {
				url := fmt.Sprintf("%s/api/v1/claims/%s", base, fmtClaim(1+rand.IntN(l.claims)))
				t0 := time.Now()
				status, err := c.get(url)
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil || status != http.StatusOK {
					errs[i]++
				}
			}
		}()
	}
	wg.Wait()
	r := result{elapsed: time.Since(start)}
	var all []time.Duration
	for i := range lat {
		all = append(all, lat[i]...)
		r.errors += errs[i]
	}
	r.ops = int64(len(all))
	r.p50, r.p99 = percentiles(all)
	return r, nil
}

func fmtClaim(n int) string { return fmt.Sprintf("DL-%04d", n) }

// client is an HTTP client holding one keep-alive connection.
type client struct{ hc *http.Client }

func newClient() *client {
	return &client{hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}}
}

func (c *client) get(url string) (int, error) {
	res, err := c.hc.Get(url)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// wrkVersion returns wrk's first line of -v output ("wrk 4.1.0 [epoll] …").
func wrkVersion(path string) string {
	out, _ := exec.Command(path, "-v").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// cpuModel reads the processor name from /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
