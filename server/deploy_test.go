package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/proctest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/sqlstore"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The addresses docs/deploy.md's configuration names, replaced by the
// test's own.
const (
	docBind    = "bind :80"
	docServer1 = "10.0.0.11:8080"
	docServer2 = "10.0.0.12:8080"
)

// TestHAProxyFromDeployDoc starts the real haproxy with the configuration
// of docs/deploy.md exactly as written (its addresses replaced by the
// test's) in front of two real `dotlab serve` processes on one PostgreSQL
// database. Requests from concurrent clients flow to both servers; then one
// server is sent SIGTERM: HAProxy's check of /readyz takes it out of
// rotation during its drain delay, after which it receives no more
// requests, it exits 0, and no client request fails at any point.
func TestHAProxyFromDeployDoc(t *testing.T) {
	testfix.Exclusive(t)
	testfix.Need(t, false, "haproxy")
	bin := proctest.Dotlab(t)
	dbURL := sqlstoretest.URL(t, sqlstore.Postgres)
	s1 := proctest.StartServe(t, bin, dbURL, "--drain-delay", "6s")
	s2 := proctest.StartServe(t, bin, dbURL, "--drain-delay", "6s")
	front := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	cfg := proctest.CodeBlock(t, filepath.Join("..", "docs", "deploy.md"), "haproxy", 0)
	for _, s := range []string{docBind, docServer1, docServer2} {
		if !strings.Contains(cfg, s) {
			t.Fatalf("docs/deploy.md's configuration no longer has %q", s)
		}
	}
	cfg = strings.NewReplacer(docBind, "bind "+front, docServer1, s1.Addr, docServer2, s2.Addr).Replace(cfg)
	h := proctest.StartHAProxy(t, cfg, front)
	base := "http://" + front

	var sub apiv1.AgentCreated
	if st := post(t, base+"/api/v1/agents", "", dotlab.NewAgent{Name: "s", Operator: "t"}, &sub); st != 201 {
		t.Fatalf("register through the balancer: %d", st)
	}
	var c apiv1.ClaimView
	if st := post(t, base+"/api/v1/claims", sub.APIKey, map[string]string{"manifest": string(sqlstoretest.ManifestJSON("balanced")), "field": "statistics"}, &c); st != 201 {
		t.Fatalf("submit through the balancer: %d", st)
	}
	if st, _, _ := proctest.Get(context.Background(), http.DefaultClient, base+"/metrics"); st != 404 {
		t.Errorf("the balancer serves /metrics: %d, want 404", st)
	}
	load := startLoad(t, base, c.ID, 4)
	waitFor(t, "requests to reach both servers", func() bool { return apiRequests(t, s1.URL) > 20 && apiRequests(t, s2.URL) > 20 })
	// Live streams through the balancer, until dotlab1 holds at least one.
	var streams []*follower
	for len(streams) < 10 && gauge(t, s1.URL, "dotlab_sse_subscribers") < 1 {
		streams = append(streams, follow(t, base+"/api/v1/labs/"+c.ID+"/events"))
		waitFor(t, "the stream to open", func() bool {
			return gauge(t, s1.URL, "dotlab_sse_subscribers")+gauge(t, s2.URL, "dotlab_sse_subscribers") >= float64(len(streams))
		})
	}
	if gauge(t, s1.URL, "dotlab_sse_subscribers") < 1 {
		t.Fatalf("HAProxy (leastconn) put none of %d streams on dotlab1", len(streams))
	}

	s1.Signal(t, syscall.SIGTERM)
	waitFor(t, "haproxy to take dotlab1 out", func() bool { return strings.Contains(h.Output(), "dotlab1 is DOWN") })
	// Still within its drain delay: it serves, but the balancer sends it
	// nothing more while the clients keep going (through dotlab2). What was
	// in flight to it when it went down is counted once it completes, so
	// the count is taken after some more requests.
	sent := load.sent.Load()
	waitFor(t, "more client requests", func() bool { return load.sent.Load() > sent+50 })
	before, sent := apiRequests(t, s1.URL), load.sent.Load()
	waitFor(t, "more client requests", func() bool { return load.sent.Load() > sent+50 })
	if after := apiRequests(t, s1.URL); after != before {
		t.Errorf("dotlab1 got %v API requests after HAProxy took it out", after-before)
	}
	if code := s1.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("dotlab1 exit code %d", code)
	}
	sent = load.sent.Load()
	waitFor(t, "requests after dotlab1 exited", func() bool { return load.sent.Load() > sent+50 })
	n, failures := load.stop()
	if len(failures) > 0 {
		t.Fatalf("%d of %d client requests failed, first: %s", len(failures), n, failures[0])
	}
	t.Logf("%d client requests through HAProxy, none failed", n)
	// The streams dotlab1 held ended with a retry hint and reconnected
	// through the balancer; every stream gets a message posted now, once.
	var msg dotlab.LabMessage
	if st := post(t, base+"/api/v1/labs/"+c.ID+"/messages", sub.APIKey, dotlab.LabMessageBody{Type: "note", To: "all", Body: "after the drain"}, &msg); st != 201 {
		t.Fatalf("post: %d", st)
	}
	ends := 0
	for i, f := range streams {
		waitFor(t, "the message on every stream", func() bool { return f.count(msg.ID) > 0 })
		f.mu.Lock()
		if n := strings.Count(strings.Join(f.messages, "\n"), msg.ID); n != 1 {
			t.Errorf("stream %d got the message %d times", i, n)
		}
		if f.hinted != f.ends {
			t.Errorf("stream %d ended %d times, %d of them with a retry hint", i, f.ends, f.hinted)
		}
		ends += f.ends
		f.mu.Unlock()
	}
	if ends == 0 {
		t.Error("no stream was ended by the draining server")
	}
	t.Logf("%d streams through HAProxy; the draining server ended %d, each with a retry hint; all resumed and got the next message once", len(streams), ends)
}

// follower is an EventSource-like client: it reads a stream, and when the
// server ends it, reconnects at once with Last-Event-ID.
type follower struct {
	mu           sync.Mutex
	lastID       string
	messages     []string // data of the message events
	ends, hinted int      // streams the server ended; those whose last field was retry:
}

func follow(t *testing.T, url string) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &follower{}
	go func() {
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			f.mu.Lock()
			if f.lastID != "" {
				req.Header.Set("Last-Event-ID", f.lastID)
			}
			f.mu.Unlock()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			f.read(res.Body)
			res.Body.Close()
		}
	}()
	return f
}

// read consumes one stream until it ends.
func (f *follower) read(body io.Reader) {
	sc := bufio.NewScanner(body)
	last, event := "", ""
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		f.mu.Lock()
		switch {
		case strings.HasPrefix(line, "id: "):
			f.lastID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "message":
			f.messages = append(f.messages, line)
		}
		f.mu.Unlock()
		last = line
	}
	if sc.Err() == nil { // the server ended the stream
		f.mu.Lock()
		f.ends++
		if strings.HasPrefix(last, "retry: ") {
			f.hinted++
		}
		f.mu.Unlock()
	}
}

func (f *follower) count(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Count(strings.Join(f.messages, "\n"), s)
}

// load is clients sending requests through the balancer until stopped.
type load struct {
	sent     atomic.Int64
	mu       sync.Mutex
	failures []string
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// startLoad runs n clients, each cycling through a read of the claim, a
// status read and a registration (a write).
func startLoad(t *testing.T, base, claimID string, n int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	t.Cleanup(cancel)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for k := 0; ctx.Err() == nil; k++ {
				var req *http.Request
				switch k % 3 {
				case 0:
					req, _ = http.NewRequestWithContext(ctx, "GET", base+"/api/v1/claims/"+claimID, nil)
				case 1:
					req, _ = http.NewRequestWithContext(ctx, "GET", base+"/api/v1/status", nil)
				default:
					b, _ := json.Marshal(dotlab.NewAgent{Name: fmt.Sprintf("load-%d-%d", i, k), Operator: "t"})
					req, _ = http.NewRequestWithContext(ctx, "POST", base+"/api/v1/agents", bytes.NewReader(b))
				}
				res, err := c.Do(req)
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					res.Body.Close()
					if res.StatusCode < 300 {
						l.sent.Add(1)
						continue
					}
					err = fmt.Errorf("status %d", res.StatusCode)
				}
				l.mu.Lock()
				l.failures = append(l.failures, fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stop ends the clients and returns how many requests succeeded and the
// failures.
func (l *load) stop() (int64, []string) {
	l.cancel()
	l.wg.Wait()
	return l.sent.Load(), l.failures
}

// gauge is the value of a gauge without labels on a server's /metrics.
func gauge(t *testing.T, root, name string) float64 {
	t.Helper()
	for _, m := range scrapeOf(t, root)[name].GetMetric() {
		return m.Gauge.GetValue()
	}
	return 0
}

func scrapeOf(t *testing.T, root string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(root + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", root, err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// apiRequests is the number of /api/ requests a server has answered, from
// its own /metrics (scraped directly, not through the balancer).
func apiRequests(t *testing.T, root string) float64 {
	t.Helper()
	n := 0.0
	for _, m := range scrapeOf(t, root)["dotlab_http_requests_total"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "route" && strings.Contains(l.GetValue(), " /api/") {
				n += m.Counter.GetValue()
			}
		}
	}
	return n
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// post sends a JSON POST and decodes the answer into out.
func post(t *testing.T, url, key string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	json.NewDecoder(res.Body).Decode(out)
	return res.StatusCode
}

// TestSystemdUnitFromDeployDoc: the unit in docs/deploy.md passes
// `systemd-analyze verify` without a warning (unknown keys, bad values),
// its ExecStart pointed at a real dotlab binary, and its ExecStart flags are
// ones `dotlab serve` accepts.
func TestSystemdUnitFromDeployDoc(t *testing.T) {
	testfix.Need(t, false, "systemd-analyze")
	bin := proctest.Dotlab(t)
	unit := proctest.CodeBlock(t, filepath.Join("..", "docs", "deploy.md"), "ini", 0)
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/dotlab serve ") {
		t.Fatal("the unit's ExecStart no longer runs /usr/local/bin/dotlab serve")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "dotlab.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(unit, "/usr/local/bin/dotlab", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(unit, "\n") {
		if args, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/dotlab serve "); ok {
			// The flags parse: --help with them exits 0, a bad one would not.
			argv := append([]string{"serve"}, strings.Fields(strings.ReplaceAll(args, "${DOTLAB_DB}", "sqlite:x.db"))...)
			if out, err := exec.Command(bin, append(argv, "--help")...).CombinedOutput(); err != nil {
				t.Fatalf("dotlab %s: %v\n%s", strings.Join(argv, " "), err, out)
			}
		}
	}
}
