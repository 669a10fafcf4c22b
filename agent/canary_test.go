package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// TestCanaryCheck: against a real loopback host, the pinned bytes are
// serving, other bytes different, a 404 and a stopped host dead, and a
// file over MaxHash serving unhashed, said in the detail.
func TestCanaryCheck(t *testing.T) {
	data := []byte("a,b\n1,2\n")
	sum := sha256.Sum256(data)
	pin := hex.EncodeToString(sum[:])
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			w.Write(data)
		case "/other":
			w.Write([]byte("a,b\n9,9\n"))
		case "/big":
			w.Write([]byte(strings.Repeat("x", 100)))
		default:
			http.NotFound(w, r)
		}
	}))
	c := &Canary{Agent: &Agent{}, HTTP: runner.LocalPolicy("/").Client(), MaxHash: 64}
	ctx := context.Background()
	check := func(path, want, detail string) {
		t.Helper()
		r := c.Check(ctx, dotlab.PinnedInput{Key: "d", URL: host.URL + path, SHA256: pin})
		if r.Status != want || !strings.Contains(r.Detail, detail) || len(r.Detail) > dotlab.MaxCanaryDetail {
			t.Fatalf("%s: %+v, want %s with %q", path, r, want, detail)
		}
	}
	check("/same", dotlab.CanaryServing, "sha256 verified")
	check("/other", dotlab.CanaryDifferent, "sha256 ")
	check("/gone", dotlab.CanaryDead, "HTTP 404")
	check("/big", dotlab.CanaryServing, "not hashed")
	host.Close()
	check("/same", dotlab.CanaryDead, "refused")
}
