package runner

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHostileURLFormsNeverConnect: a canary listener on loopback counts
// connections. Every spelling of its address that resolvers accept but the
// rules refuse ends in ErrRefused without one connection, under the strict
// policy and under AllowPrivate; the dotted-decimal address reaches it with
// AllowPrivate (so the canary can see a connection) and not strictly.
func TestHostileURLFormsNeverConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			// Answer only after the request: a response written first arrives
			// on the client's connection before it sends, and Go's transport
			// then drops it as unsolicited (a flake seen under load).
			http.ReadRequest(bufio.NewReader(c))
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	p := func(s string) string { return strings.ReplaceAll(s, "PORT", strconv.Itoa(port)) }
	hostile := []string{
		"http://2130706433:PORT/x", "http://0x7f.1:PORT/x", "http://0x7f000001:PORT/x", "http://017700000001:PORT/x",
		"http://127.1:PORT/x", "http://0177.0.0.1:PORT/x", "http://u:pw@127.0.0.1:PORT/x", "http://127.0.0.1:PORT/a b",
		"http://１２７.0.0.1:PORT/x",
	}
	for _, pol := range []Policy{{}, {AllowPrivate: true}} {
		for _, raw := range hostile {
			_, err := pol.CheckURL("datasets[0].url", p(raw))
			if !errors.Is(err, ErrRefused) {
				t.Errorf("AllowPrivate=%v CheckURL(%s) = %v, want ErrRefused", pol.AllowPrivate, raw, err)
			}
			if strings.Contains(raw, " ") {
				continue // http.NewRequest percent-encodes it: only the raw form is refused
			}
			if resp, err := pol.Client().Get(p(raw)); err == nil {
				resp.Body.Close()
				t.Errorf("AllowPrivate=%v: GET %s succeeded", pol.AllowPrivate, raw)
			}
		}
	}
	for _, raw := range []string{"http://127.0.0.1:PORT/x", "http://[::ffff:127.0.0.1]:PORT/x", "http://localhost:PORT/x"} {
		if _, err := (Policy{}).Client().Get(p(raw)); !errors.Is(err, ErrRefused) {
			t.Errorf("strict GET %s: %v, want ErrRefused", raw, err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the canary saw %d connections from refused URLs", n)
	}
	resp, err := Policy{AllowPrivate: true}.Client().Get(p("http://127.0.0.1:PORT/x"))
	if err != nil {
		t.Fatalf("AllowPrivate GET 127.0.0.1: %v", err)
	}
	resp.Body.Close()
	if n := conns.Load(); n != 1 {
		t.Fatalf("the canary saw %d connections, want 1 (the positive control)", n)
	}
}

func TestCheckImage(t *testing.T) {
	const dig = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for ref, want := range map[string][2]bool{ // strict, AllowPrivate
		"registry.example.org/lab/python": {true, true},
		"127.0.0.1:5000/lab/python":       {false, true},
		"localhost:5000/lab/python":       {false, true},
		"169.254.169.254/lab/python":      {false, false},
		"2130706433:5000/lab/python":      {false, false},
	} {
		for i, pol := range []Policy{{}, {AllowPrivate: true}} {
			err := pol.CheckImage("environment.image", ref+dig)
			if (err == nil) != want[i] || err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("AllowPrivate=%v CheckImage(%s) = %v, want allowed=%v", pol.AllowPrivate, ref, err, want[i])
			}
		}
	}
}
