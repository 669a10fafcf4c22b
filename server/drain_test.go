package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/proctest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// TestServeDrainsOnSIGTERM runs a real `dotlab serve` process and sends it
// SIGTERM while a slow request (a POST whose body is still arriving) and a
// live event stream are open: /healthz and /readyz answer 503 during
// --drain-delay while the server still serves; then the stream ends with
// an SSE retry hint, the slow request completes with 200, and the process
// exits 0 (docs/deploy.md "Draining").
func TestServeDrainsOnSIGTERM(t *testing.T) {
	bin := proctest.Dotlab(t)
	s := proctest.StartServe(t, bin, sqlstoretest.URL(t, sqlstore.SQLite), "--drain-delay", "1s", "--shutdown-timeout", "20s")
	r := &running{t: t, root: s.URL}
	var sub, joiner apiv1.AgentCreated
	r.call("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: "s", Operator: "t"}, &sub)
	r.call("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: "j", Operator: "t"}, &joiner)
	var c apiv1.ClaimView
	if st := r.call("POST", "/api/v1/claims", sub.APIKey, map[string]string{"manifest": string(sqlstoretest.ManifestJSON("drain")), "field": "statistics"}, &c); st != 201 {
		t.Fatalf("submit: %d", st)
	}
	stream := openStream(t, s.URL+"/api/v1/labs/"+c.ID+"/events")
	// The slow request: headers and half the body now, the rest later.
	body := `{"role": "collaborator"}`
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/labs/%s/join HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		c.ID, s.Addr, joiner.APIKey, len(body), body[:10])

	s.Signal(t, syscall.SIGTERM)
	waitStatus(t, s.URL+"/healthz", 503)
	var e apiv1.ErrorBody
	if st := r.call("GET", "/readyz", "", nil, &e); st != 503 || len(e.Detail) != 1 || !strings.HasPrefix(e.Detail[0], "draining: ") {
		t.Fatalf("readyz while draining: %d %+v", st, e)
	}
	if st := r.call("GET", "/api/v1/claims/"+c.ID, "", nil, nil); st != 200 {
		t.Fatalf("a request during the drain delay: %d, want it served", st)
	}
	// After the delay the stream ends, its last field a prompt retry.
	select {
	case lines := <-stream:
		last := lines[len(lines)-1]
		ms, err := strconv.Atoi(strings.TrimPrefix(last, "retry: "))
		if !strings.HasPrefix(last, "retry: ") || err != nil || ms < 100 || ms >= 1000 {
			t.Fatalf("the stream ended with %q (lines %q), want a retry hint under 1000 ms", last, lines)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream was not closed")
	}
	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatalf("finishing the slow request: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the slow request got no answer: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("the slow request: %d, want 200", res.StatusCode)
	}
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0; output:\n%s", code, s.Output())
	}
	if out := s.Output(); !strings.Contains(out, "stopped cleanly") {
		t.Fatalf("no clean stop logged:\n%s", out)
	}
}

// openStream reads an event stream in the background; the channel gets its
// non-empty lines once the server ends it.
func openStream(t *testing.T, url string) <-chan []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("stream: %d", res.StatusCode)
	}
	out := make(chan []string, 1)
	sc := bufio.NewScanner(res.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "retry:") {
		t.Fatalf("stream opened with %q", sc.Text())
	}
	go func() {
		defer res.Body.Close()
		lines := []string{sc.Text()}
		for sc.Scan() {
			if sc.Text() != "" {
				lines = append(lines, sc.Text())
			}
		}
		out <- lines
	}()
	return out
}

// waitStatus polls url until it answers want (at most 10 s).
func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _, err := proctest.Get(context.Background(), c, url)
		if err == nil && st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %v, want %d", url, st, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
