package sandbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
)

// The pinned-download responder (docs/sandbox.md "Pinned downloads"): an
// HTTP proxy on 127.0.0.1:ResponderPort inside the sandbox's loopback-only
// network namespace that answers exactly the manifest's pinned URLs from
// the verified bytes, over http (absolute-form requests) and https (CONNECT,
// TLS terminated with the run's ephemeral CA), and refuses everything
// else. It never dials anything: it has no way to reach off the machine and
// no reason to. This file is the server; responder_proc.go starts it in
// its own unprivileged process.

// ResponderPort is the TCP port the responder listens on, on 127.0.0.1 in
// the sandbox's network namespace (http_proxy=http://127.0.0.1:3128).
const ResponderPort = 3128

// Bounds on what a stranger's request may cost the responder.
const (
	responderMaxConns      = 64               // connections open at once; more wait in the kernel's backlog
	responderHeaderBytes   = 16 << 10         // request line plus headers
	responderHeaderTimeout = 10 * time.Second // to read one request's headers
	responderIdleTimeout   = 30 * time.Second // a kept-alive connection with no request
	responderMaxURLBytes   = 2000             // a logged URL is cut there
	responderMaxLogLines   = 1000             // request lines logged per run; then one line says how many more
)

// ResponderEvent is one request the responder answered, one JSON line of
// its log (Result.Downloads; the runner copies each into logs.jsonl).
// Status is the HTTP status sent; Refused says why a request was not
// served ("" when it was): "method" (not GET or HEAD), "not pinned" (no
// pinned URL has that scheme, host, path and query), "host" (a CONNECT to a
// host with no pinned https URL), "not a proxy request" (an origin-form
// request to the proxy itself).
type ResponderEvent struct {
	Method  string `json:"method"`
	URL     string `json:"url"`
	Status  int    `json:"status"`
	Bytes   int64  `json:"bytes,omitempty"`
	Refused string `json:"refused,omitempty"`
	// Dropped, on the last line only, counts requests not logged once
	// responderMaxLogLines were.
	Dropped int `json:"dropped,omitempty"`
}

// pinnedFile is one pinned URL the responder serves: its
// dotlab.DownloadURLKey and the verified bytes.
type pinnedFile struct {
	body io.ReaderAt
	size int64
	// handles are further descriptors of the same file, each with its own
	// offset, lent to one whole-file GET at a time so that a plain http
	// answer goes out by sendfile(2) (net.TCPConn.ReadFrom); when all are
	// lent, body is read with pread.
	handles chan *os.File
}

// responder is the server's state.
type responder struct {
	files map[string]pinnedFile
	// leaves holds the TLS certificate for each https authority with a
	// pinned URL, by "host:port" (lower case, port always written).
	leaves map[string]*tls.Certificate
	events *eventLog
	// active counts requests being handled, so that the log is closed
	// only after the last one has written its line (drain).
	active sync.WaitGroup
}

// drain waits up to a second for the requests still being handled.
func (s *responder) drain() {
	done := make(chan struct{})
	go func() {
		s.active.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// eventLog writes ResponderEvents as JSON lines, at most
// responderMaxLogLines of them, and then counts.
type eventLog struct {
	mu      sync.Mutex
	w       *json.Encoder
	n       int
	dropped int
}

func (l *eventLog) add(e ResponderEvent) {
	if len(e.URL) > responderMaxURLBytes {
		e.URL = e.URL[:responderMaxURLBytes] + "…"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= responderMaxLogLines {
		l.dropped++
		return
	}
	l.n++
	l.w.Encode(e)
}

// close writes the count of requests not logged, if any.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 {
		l.w.Encode(ResponderEvent{Dropped: l.dropped})
	}
}

// serve answers connections on ln until ctx ends.
func (s *responder) serve(ctx context.Context, ln net.Listener) error {
	srv := s.server(func(w http.ResponseWriter, r *http.Request) { s.proxy(w, r) })
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(&limitListener{Listener: ln, slots: make(chan struct{}, responderMaxConns)})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// server is an http.Server with the responder's bounds.
func (s *responder) server(h http.HandlerFunc) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: responderHeaderTimeout,
		IdleTimeout:       responderIdleTimeout,
		MaxHeaderBytes:    responderHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// proxy handles one request to the proxy: CONNECT opens a TLS tunnel to a
// pinned https host; an absolute-form http:// request is answered from the
// pinned files.
func (s *responder) proxy(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Done()
	if r.Method == http.MethodConnect {
		s.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		s.refuse(w, r.Method, r.URL.String(), http.StatusBadRequest, "not a proxy request")
		return
	}
	s.answer(w, r, "http", r.URL.Host)
}

// connect answers a CONNECT to a host with a pinned https URL with 200 and
// serves HTTP over TLS on the tunnel, with the leaf certificate for that
// host; any other CONNECT is refused.
func (s *responder) connect(w http.ResponseWriter, r *http.Request) {
	authority := strings.ToLower(r.Host)
	if _, _, err := net.SplitHostPort(authority); err != nil {
		authority += ":443"
	}
	leaf := s.leaves[authority]
	if leaf == nil {
		s.refuse(w, r.Method, "https://"+r.Host+"/", http.StatusForbidden, "host")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "tunnel not supported", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	// Bytes the client sent after the CONNECT headers (its TLS hello) are
	// in buf's reader.
	tc := tls.Server(&bufferedConn{Conn: conn, r: buf.Reader}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	})
	conn.SetDeadline(time.Now().Add(responderHeaderTimeout))
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return
	}
	conn.SetDeadline(time.Time{})
	inner := s.server(func(w http.ResponseWriter, r *http.Request) {
		s.active.Add(1)
		defer s.active.Done()
		if r.Method == http.MethodConnect {
			s.refuse(w, r.Method, r.Host, http.StatusMethodNotAllowed, "method")
			return
		}
		// The Host the client names inside the tunnel must be the host it
		// connected to: the leaf certificate is only for that one.
		host := strings.ToLower(r.Host)
		if _, _, err := net.SplitHostPort(host); err != nil {
			host += ":443"
		}
		if host != authority {
			s.refuse(w, r.Method, "https://"+r.Host+r.URL.RequestURI(), http.StatusForbidden, "host")
			return
		}
		s.answer(w, r, "https", r.Host)
	})
	inner.Serve(&oneConnListener{conn: tc})
}

// answer serves a pinned URL to a GET or HEAD, and refuses every other
// method and every URL that is not pinned.
func (s *responder) answer(w http.ResponseWriter, r *http.Request, scheme, host string) {
	shown := scheme + "://" + host + r.URL.RequestURI()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.refuse(w, r.Method, shown, http.StatusMethodNotAllowed, "method")
		return
	}
	key, err := dotlab.RequestURLKey(scheme, host, r.URL.EscapedPath(), r.URL.RawQuery)
	f, ok := s.files[key]
	if err != nil || !ok {
		s.refuse(w, r.Method, shown, http.StatusForbidden, "not pinned")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	cw := &countingWriter{ResponseWriter: w}
	body := io.NewSectionReader(f.body, 0, f.size)
	if r.Method == http.MethodGet && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Length", strconv.FormatInt(f.size, 10))
		w.Header().Set("Accept-Ranges", "bytes")
		cw.WriteHeader(http.StatusOK)
		sendWhole(cw, f, body)
	} else {
		http.ServeContent(cw, r, "", time.Time{}, body)
	}
	s.events.add(ResponderEvent{Method: r.Method, URL: shown, Status: cw.status(), Bytes: cw.n})
}

// sendWhole writes the whole of f: from a lent descriptor when one is free
// (sendfile on a plain connection), else in 1 MiB preads (ServeContent
// copies in 32 KiB; TLS cuts records of 16 KiB from either).
func sendWhole(w io.Writer, f pinnedFile, body io.Reader) {
	select {
	case h := <-f.handles:
		defer func() { f.handles <- h }()
		if _, err := h.Seek(0, io.SeekStart); err == nil {
			io.Copy(w, io.LimitReader(h, f.size))
			return
		}
	default:
	}
	io.CopyBuffer(onlyWriter{w}, body, make([]byte, 1<<20))
}

// onlyWriter hides a ReaderFrom, so that io.CopyBuffer uses its buffer.
type onlyWriter struct{ io.Writer }

// refuse answers status with a short JSON body that names the request and
// what to pin, and logs it.
func (s *responder) refuse(w http.ResponseWriter, method, shown string, status int, why string) {
	s.events.add(ResponderEvent{Method: method, URL: shown, Status: status, Refused: why})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	msg := "the sandbox has no network: only GET and HEAD of the manifest's pinned downloads are answered"
	json.NewEncoder(w).Encode(map[string]string{"error": "refused by the DotLab sandbox (" + why + ")", "method": method, "url": shown, "detail": msg})
}

// countingWriter counts body bytes and remembers the status.
type countingWriter struct {
	http.ResponseWriter
	code int
	n    int64
}

func (c *countingWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

// ReadFrom passes src to the http.ResponseWriter's ReadFrom (which hands a
// file to the connection's sendfile), counting the bytes.
func (c *countingWriter) ReadFrom(src io.Reader) (int64, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(onlyWriter{c.ResponseWriter}, src)
	}
	c.n += n
	return n, err
}

func (c *countingWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

// limitListener holds at most cap(slots) connections open at once.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

// slotConn gives its slot back once, on the first Close.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// ReadFrom lets net/http reach the TCP connection's sendfile.
func (c *slotConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(onlyWriter{c.Conn}, r)
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// bufferedConn reads first what a bufio.Reader already holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener hands out one connection, then blocks until it is closed.
type oneConnListener struct {
	mu   sync.Mutex
	conn net.Conn
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	c := l.conn
	l.conn = nil
	done := l.done
	l.mu.Unlock()
	if c != nil {
		return &closeNotifyConn{Conn: c, done: done}, nil
	}
	<-done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error { return nil }

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// closeNotifyConn closes done when it is closed.
type closeNotifyConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

// errorf is fmt.Errorf with the responder's prefix.
func errorf(format string, args ...any) error {
	return fmt.Errorf("sandbox: download responder: "+format, args...)
}
