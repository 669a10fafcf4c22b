package httpapi_test

import (
	"context"
	"net/http"
	"net/netip"
	"testing"

	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/sqlstore"
)

// openStreams opens n live streams of claim id as client address from
// (behind the trusted proxy 127.0.0.1: X-Forwarded-For names the client)
// and returns how many the server took and the status of the first it
// refused (0: none refused).
func openStreams(t *testing.T, ctx context.Context, e *env, id, from string, n int) (opened, refused int) {
	for i := 0; i < n; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/labs/"+id+"/events", nil)
		req.Header.Set("X-Forwarded-For", from)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			res.Body.Close()
			return opened, res.StatusCode
		}
		opened++ // held open until ctx ends
	}
	return opened, 0
}

// TestStreamsPerAddress: one client address opening streams until refused
// fills the server's whole stream cap when there is no per-address limit,
// and another client is then refused (503); with the per-address limit it
// gets DefaultStreamsPerAddr streams and a 429, and another client still
// gets its streams. Addresses are the forwarded clients behind a trusted
// proxy, as `dotlab serve --trusted-proxy` counts them. The server's cap
// is 300 here (10,000 by default) to keep the test short.
func TestStreamsPerAddress(t *testing.T) {
	const maxStreams = 300
	run := func(t *testing.T, perAddr int) (attacker, attackerStatus, other, otherStatus int) {
		e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) {
			c.MaxStreams, c.MaxStreamsPerAddr = maxStreams, perAddr
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		})
		_, key := e.register("submitter")
		id := e.submit(key, "streams")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		attacker, attackerStatus = openStreams(t, ctx, e, id, "203.0.113.7", maxStreams+10)
		other, otherStatus = openStreams(t, ctx, e, id, "198.51.100.9", 3)
		return
	}
	t.Run("before", func(t *testing.T) {
		a, as, o, os := run(t, maxStreams+10)
		t.Logf("no per-address limit: one address holds %d streams (then %d); another address gets %d (then %d)", a, as, o, os)
		if a != maxStreams || os != http.StatusServiceUnavailable {
			t.Errorf("attack not reproduced: %d streams, other address %d", a, os)
		}
	})
	t.Run("after", func(t *testing.T) {
		a, as, o, os := run(t, 0)
		t.Logf("--streams-per-addr %d: one address holds %d streams (then %d); another address gets %d (then %d)", httpapi.DefaultStreamsPerAddr, a, as, o, os)
		if a != httpapi.DefaultStreamsPerAddr || as != http.StatusTooManyRequests || o != 3 || os != 0 {
			t.Errorf("one address: %d streams then %d, want %d then 429; another: %d then %d, want 3 then none",
				a, as, httpapi.DefaultStreamsPerAddr, o, os)
		}
	})
}
