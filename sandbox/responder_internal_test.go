package sandbox

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/testfix"
	"golang.org/x/sys/unix"
)

// startTestResponder starts the real responder process (this test binary
// re-executed, see TestMain in responder_test.go) for two pinned URLs.
func startTestResponder(t *testing.T) (*runningResponder, string, []byte) {
	t.Helper()
	testfix.Need(t, true)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	body := []byte(strings.Repeat("0123456789", 1000))
	file := filepath.Join(dir, "blob")
	os.WriteFile(file, body, 0o400)
	bundle := filepath.Join(dir, "bundle")
	os.Mkdir(bundle, 0o700)
	rr, err := startResponder(exe, bundle, []Download{{URL: "http://data.example.org/t.csv", File: file}, {URL: "https://127.0.0.1:8443/x.bin?v=1", File: file}},
		time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rr.stop() })
	return rr, bundle, body
}

// dialIn connects to the responder from inside its network namespace (on
// a thread that joins it and then ends with the test's goroutine).
func dialIn(t testing.TB, rr *runningResponder) net.Conn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		fd, err := unix.Open(rr.netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, err}
			return
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ResponderPort), 5*time.Second)
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return r.c
}

// roundTrip writes raw on a new connection and reads one response.
func roundTrip(t *testing.T, rr *runningResponder, raw string) (*http.Response, string) {
	t.Helper()
	c := dialIn(t, rr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, raw)
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestResponderProcess: the responder runs as ResponderUID with no
// capabilities and no_new_privs, chrooted, in a network namespace of its
// own; it serves GET, HEAD and Range of a pinned URL and refuses other
// methods, URLs, hosts, origin-form requests and oversized headers, and
// logs each request.
func TestResponderProcess(t *testing.T) {
	rr, _, body := startTestResponder(t)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", rr.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", ResponderUID, ResponderUID, ResponderUID, ResponderUID),
		fmt.Sprintf("Gid:\t%d\t%d", ResponderGID, ResponderGID), "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("responder status lacks %q:\n%s", want, status)
		}
	}
	if !regexp.MustCompile(`(?m)^Groups:\s*$`).Match(status) {
		t.Errorf("responder has supplementary groups:\n%s", status)
	}
	ours, _ := os.Readlink("/proc/self/ns/net")
	if theirs, _ := os.Readlink(rr.netns); theirs == ours || theirs == "" {
		t.Errorf("responder netns %q, ours %q", theirs, ours)
	}
	if root, _ := os.Readlink(fmt.Sprintf("/proc/%d/root", rr.cmd.Process.Pid)); !strings.HasSuffix(root, "responder-root") {
		t.Errorf("responder root %q, want its empty directory", root)
	}
	cases := []struct {
		raw    string
		status int
		body   string
	}{
		{"GET http://data.example.org/t.csv HTTP/1.1\r\nHost: data.example.org\r\n\r\n", 200, string(body)},
		{"GET http://DATA.example.org:80/t.csv HTTP/1.1\r\nHost: data.example.org\r\nRange: bytes=10-14\r\n\r\n", 206, "01234"},
		{"HEAD http://data.example.org/t.csv HTTP/1.1\r\nHost: data.example.org\r\n\r\n", 200, ""},
		{"POST http://data.example.org/t.csv HTTP/1.1\r\nHost: data.example.org\r\nContent-Length: 3\r\n\r\nabc", 405, `"method":"POST"`},
		{"GET http://data.example.org/t.csv?x=1 HTTP/1.1\r\nHost: data.example.org\r\n\r\n", 403, `"url":"http://data.example.org/t.csv?x=1"`},
		{"GET /t.csv HTTP/1.1\r\nHost: data.example.org\r\n\r\n", 400, "not a proxy request"},
		{"CONNECT elsewhere.example.net:443 HTTP/1.1\r\nHost: elsewhere.example.net:443\r\n\r\n", 403, "(host)"},
		{"GET http://data.example.org/t.csv HTTP/1.1\r\nHost: data.example.org\r\nX-Big: " + strings.Repeat("a", responderHeaderBytes+8192) + "\r\n\r\n", 431, ""},
	}
	for _, c := range cases {
		resp, got := roundTrip(t, rr, c.raw)
		if resp.StatusCode != c.status || !strings.Contains(got, c.body) || c.body == "" && got != "" && resp.StatusCode != 431 {
			t.Errorf("%.60q: %d %.200q, want %d with %q", c.raw, resp.StatusCode, got, c.status, c.body)
		}
	}
	events := rr.stop()
	if len(events) != len(cases)-1 { // the oversized header never reaches the handler
		t.Fatalf("events %+v", events)
	}
	if e := events[3]; e.Method != "POST" || e.Refused != "method" || e.Status != 405 || e.URL != "http://data.example.org/t.csv" {
		t.Errorf("POST logged as %+v", e)
	}
}

// TestResponderTLS: a CONNECT to the pinned https host is tunnelled and
// answered over TLS with a leaf certificate for that host that verifies
// against the run's CA (bundle/ca/ca.pem) and no other root; a Host inside
// the tunnel that is not the CONNECT's is refused.
func TestResponderTLS(t *testing.T) {
	rr, bundle, body := startTestResponder(t)
	caPEM, err := os.ReadFile(filepath.Join(bundle, "ca", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	get := func(host, path string) (int, string) {
		c := dialIn(t, rr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("TLS handshake against the run's CA: %v", err)
		}
		fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
		resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, got := get("127.0.0.1:8443", "/x.bin?v=1"); code != 200 || got != string(body) {
		t.Errorf("pinned https URL: %d %.80q", code, got)
	}
	if code, _ := get("127.0.0.1:8443", "/x.bin"); code != 403 {
		t.Errorf("unpinned path in the tunnel: %d, want 403", code)
	}
	if code, _ := get("other.example.org", "/x.bin?v=1"); code != 403 {
		t.Errorf("another Host in the tunnel: %d, want 403", code)
	}
}

// TestResponderConnectionCap: with responderMaxConns connections open, one
// more is not served until one of them closes.
func TestResponderConnectionCap(t *testing.T) {
	rr, _, _ := startTestResponder(t)
	var open []net.Conn
	for i := 0; i < responderMaxConns; i++ {
		open = append(open, dialIn(t, rr))
	}
	time.Sleep(200 * time.Millisecond) // all accepted
	extra := dialIn(t, rr)
	io.WriteString(extra, "HEAD http://data.example.org/t.csv HTTP/1.1\r\nHost: data.example.org\r\n\r\n")
	got := make(chan error, 1)
	go func() {
		_, err := http.ReadResponse(bufio.NewReader(extra), nil)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("connection %d was served while %d were open (%v)", responderMaxConns+1, responderMaxConns, err)
	case <-time.After(500 * time.Millisecond):
	}
	open[0].Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not served after a connection closed")
	}
}
