package sandbox

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// BenchmarkResponder100MB isolates the responder's cost on a 100 MB pinned
// download from any client tool's: a Go client in the responder's network
// namespace reads the whole body through the proxy, over http (sendfile)
// and over https (CONNECT, TLS with the run's CA), against reading the same
// cached file from disk (page cache), interleaved in each iteration, all
// with 1 MiB reads into io.Discard; and, as the floor of any HTTP server,
// net/http's own file server on the host's loopback. bench/README.md "Pinned downloads".
func BenchmarkResponder100MB(b *testing.B) {
	testfix.Need(b, true)
	exe, _ := os.Executable()
	dir := b.TempDir()
	file := filepath.Join(dir, "big.bin")
	big := make([]byte, 100<<20)
	rand.Read(big)
	os.WriteFile(file, big, 0o400)
	bundle := filepath.Join(dir, "bundle")
	os.Mkdir(bundle, 0o700)
	rr, err := startResponder(exe, bundle, []Download{{URL: "http://data.example.org/big.bin", File: file}, {URL: "https://data.example.org/big.bin", File: file}}, time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	defer rr.stop()
	caPEM, _ := os.ReadFile(filepath.Join(bundle, "ca", "ca.pem"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	buf := make([]byte, 1<<20)
	readBody := func(r io.Reader) {
		resp, err := http.ReadResponse(bufio.NewReaderSize(r, 1<<20), nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%v %v", resp, err)
		}
		n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
		if err != nil || n != int64(len(big)) {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
	plain := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer plain.Close()
	var tFile, tHTTP, tHTTPS, tPlain time.Duration
	for i := 0; i < b.N; i++ {
		start0 := time.Now()
		pc, err := net.Dial("tcp", plain.Listener.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(pc, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		readBody(pc)
		pc.Close()
		tPlain += time.Since(start0)

		start := time.Now()
		f, _ := os.Open(file)
		if n, _ := io.CopyBuffer(io.Discard, onlyReader{f}, buf); n != int64(len(big)) {
			b.Fatal("short file read")
		}
		f.Close()
		tFile += time.Since(start)

		start = time.Now()
		c := dialIn(b, rr)
		io.WriteString(c, "GET http://data.example.org/big.bin HTTP/1.1\r\nHost: data.example.org\r\n\r\n")
		readBody(c)
		c.Close()
		tHTTP += time.Since(start)

		start = time.Now()
		c = dialIn(b, rr)
		io.WriteString(c, "CONNECT data.example.org:443 HTTP/1.1\r\nHost: data.example.org:443\r\n\r\n")
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT %v %v", resp, err)
		}
		tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "data.example.org"})
		fmt.Fprintf(tc, "GET /big.bin HTTP/1.1\r\nHost: data.example.org\r\n\r\n")
		readBody(tc)
		tc.Close()
		tHTTPS += time.Since(start)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(tFile), "file-ms")
	b.ReportMetric(ms(tHTTP), "http-ms")
	b.ReportMetric(ms(tHTTPS), "https-ms")
	b.ReportMetric(ms(tHTTP)/ms(tFile), "x-http-vs-file")
	b.ReportMetric(ms(tHTTPS)/ms(tFile), "x-https-vs-file")
	b.ReportMetric(ms(tPlain), "plain-fileserver-http-ms")
	b.ReportMetric(ms(tHTTP)/ms(tPlain), "x-http-vs-plain-fileserver")
}

// onlyReader hides a WriterTo.
type onlyReader struct{ io.Reader }
