package imagebuild

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/netpolicy"
)

// startEgress serves an Egress admitting allow on loopback and returns a
// client that goes through it.
func startEgress(t *testing.T, allow ...string) (*Egress, *http.Client) {
	t.Helper()
	e, err := NewEgress(EgressOptions{Allow: allow, Rules: netpolicy.Rules{AllowPrivate: true}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.Serve(ctx, l)
	pu, _ := url.Parse("http://" + l.Addr().String())
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	return e, &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEgressAdmitsOnlyTheList(t *testing.T) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mirror "+r.URL.Path) })
	mirror := httptest.NewServer(hello)
	defer mirror.Close()
	index := httptest.NewTLSServer(hello)
	defer index.Close()
	other := httptest.NewServer(hello)
	defer other.Close()
	e, c := startEgress(t, mirror.URL, strings.TrimPrefix(index.URL, "https://"))

	if code, body := get(t, c, mirror.URL+"/debian/dists"); code != 200 || body != "mirror /debian/dists" {
		t.Fatalf("admitted http: %d %q", code, body)
	}
	if code, body := get(t, c, index.URL+"/simple/"); code != 200 || body != "mirror /simple/" {
		t.Fatalf("admitted CONNECT: %d %q", code, body)
	}
	code, body := get(t, c, other.URL+"/x")
	if code != http.StatusForbidden || !strings.Contains(body, EgressRule) || !strings.Contains(body, strings.TrimPrefix(other.URL, "http://")) {
		t.Fatalf("other host over http: %d %q", code, body)
	}
	// An https URL to a host not on the list: the CONNECT is refused.
	otherTLS := httptest.NewTLSServer(hello)
	defer otherTLS.Close()
	if code, body := get(t, c, otherTLS.URL+"/x"); code == 200 {
		t.Fatalf("other host over CONNECT admitted: %q", body)
	}
	if r := e.Refused(); len(r) != 2 || !strings.Contains(r[0], EgressRule) {
		t.Fatalf("refusals recorded: %q", r)
	}
}

func TestEgressRefusesMetadataEvenWhenListed(t *testing.T) {
	if _, err := NewEgress(EgressOptions{Allow: []string{"169.254.169.254:80"}, Rules: netpolicy.Rules{AllowPrivate: true}}); err == nil {
		t.Fatal("a metadata address was admitted to the egress list")
	}
	if _, err := NewEgress(EgressOptions{Allow: []string{"127.0.0.1:80"}}); err == nil {
		t.Fatal("loopback admitted without AllowPrivate")
	}
	// A listed name that resolves to a refused address is refused when dialled.
	e, c := startEgress(t, "localhost:1")
	e.rules = netpolicy.Rules{}
	if code, _ := get(t, c, "http://localhost:1/"); code == 200 {
		t.Fatal("dialled a refused address")
	}
}

func TestEgressByteBudget(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 1<<20))
	}))
	defer big.Close()
	e, err := NewEgress(EgressOptions{Allow: []string{big.URL}, Rules: netpolicy.Rules{AllowPrivate: true}, MaxBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Serve(ctx, l)
	pu, _ := url.Parse("http://" + l.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := c.Get(big.URL)
	if err == nil {
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n >= 1<<20 {
			t.Fatalf("relayed %d bytes past a 64 KiB budget", n)
		}
	}
}

// TestEgressNamesTheAddressAnAdmittedHostResolvesTo: when the address an
// admitted host resolves to is refused at dial time (control, under the
// strict rules), the answer is a 403 whose body names the host, the
// address and --allow-private-urls, recorded among the refusals; any other
// upstream failure stays a 502 naming the host.
func TestEgressNamesTheAddressAnAdmittedHostResolvesTo(t *testing.T) {
	e, err := NewEgress(EgressOptions{Allow: []string{"mirror.example.org:80"}})
	if err != nil {
		t.Fatal(err)
	}
	cerr := e.control("tcp", "10.1.2.3:80", nil)
	if cerr == nil {
		t.Fatal("a private address was dialled under the strict rules")
	}
	rec := httptest.NewRecorder()
	e.upstreamFailed(rec, "mirror.example.org:80", &net.OpError{Op: "dial", Net: "tcp", Err: cerr})
	body := rec.Body.String()
	if rec.Code != http.StatusForbidden || !strings.Contains(body, "mirror.example.org:80") || !strings.Contains(body, "resolves to 10.1.2.3") || !strings.Contains(body, "--allow-private-urls") {
		t.Fatalf("refusal %d %q", rec.Code, body)
	}
	if r := e.Refused(); len(r) != 1 || r[0] != strings.TrimSpace(body) {
		t.Fatalf("refusals %q", r)
	}
	rec = httptest.NewRecorder()
	e.upstreamFailed(rec, "mirror.example.org:80", errors.New("connection refused"))
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "mirror.example.org:80") {
		t.Fatalf("other failure %d %q", rec.Code, rec.Body.String())
	}
}
