package runner

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRedirectLimit: docs/sandbox.md says a fetch follows at most 5
// redirects. A real loopback server answers /hop/N with a redirect to
// /hop/N-1 and /hop/0 with the data: a chain of exactly MaxRedirects (5)
// redirects is followed to the end; one of 6 is refused at the sixth, which
// is never requested.
func TestRedirectLimit(t *testing.T) {
	if MaxRedirects != 5 {
		t.Fatalf("MaxRedirects = %d; docs/sandbox.md promises 5", MaxRedirects)
	}
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if n == 0 {
			io.WriteString(w, "data")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	}))
	defer srv.Close()
	c := Policy{AllowPrivate: true}.Client()
	for hops := 0; hops <= MaxRedirects+2; hops++ {
		requests.Store(0)
		resp, err := c.Get(fmt.Sprintf("%s/hop/%d", srv.URL, hops))
		if hops <= MaxRedirects {
			if err != nil {
				t.Fatalf("%d redirects: %v, want them followed", hops, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "data" || requests.Load() != int64(hops+1) {
				t.Fatalf("%d redirects: body %q after %d requests, want \"data\" after %d", hops, body, requests.Load(), hops+1)
			}
			continue
		}
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%d redirects followed; the limit is %d", hops, MaxRedirects)
		}
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "more than 5 redirects") {
			t.Fatalf("%d redirects: %v, want a refusal naming the limit", hops, err)
		}
		if got := requests.Load(); got != MaxRedirects+1 {
			t.Fatalf("%d redirects: the server saw %d requests, want %d (the original and 5 redirects; the sixth never requested)", hops, got, MaxRedirects+1)
		}
	}
}

// TestRedirectTargetsPassTheURLRules: a redirect to a non-standard spelling
// of an address, to credentials, to file:// or to a metadata address is
// refused before it is requested, also with AllowPrivate.
func TestRedirectTargetsPassTheURLRules(t *testing.T) {
	var canary atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { canary.Add(1) }))
	defer target.Close()
	port := target.URL[strings.LastIndex(target.URL, ":")+1:]
	for _, loc := range []string{
		"http://2130706433:" + port + "/x",
		"http://0x7f.1:" + port + "/x",
		"http://u:s3cr3t@127.0.0.1:" + port + "/x",
		"file:///etc/passwd",
		"http://169.254.169.254/latest/meta-data/",
		"gopher://127.0.0.1:" + port + "/x",
	} {
		src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
		}))
		resp, err := Policy{AllowPrivate: true}.Client().Get(src.URL)
		src.Close()
		if err == nil {
			resp.Body.Close()
			t.Errorf("redirect to %s followed", loc)
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("redirect to %s: %v, want ErrRefused", loc, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("redirect to %s: the error repeats the credentials: %v", loc, err)
		}
	}
	if n := canary.Load(); n != 0 {
		t.Fatalf("the redirect target was reached %d times", n)
	}
}
