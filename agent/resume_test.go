package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/runner"
)

type brokenEngine struct{}

func (brokenEngine) Rerun(context.Context, *dotlab.Manifest, string) (*runner.Record, error) {
	return nil, errors.New("image not in the store")
}

// TestRunnerTakesUpHeldJob: a runner whose rerun failed on its own side
// (here: no image) still holds the job it accepted; the next runner process
// of the same agent takes that job up before drawing, and publishes it,
// instead of leaving it to be abandoned.
func TestRunnerTakesUpHeldJob(t *testing.T) {
	ctx := context.Background()
	c := testServer(t)
	sub, run := submitterAndRunner(t, c)
	claim, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON("held job"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	first := &Agent{Client: c.WithKey(run.APIKey), Engine: brokenEngine{}, WorkDir: t.TempDir()}
	if id, err := first.RunOnce(ctx); id != claim.ID || err == nil {
		t.Fatalf("first process: %q %v; want its rerun to fail", id, err)
	}
	if cv, _ := c.Claim(ctx, claim.ID); cv.State != dotlab.StateRunning || cv.RunnerID != run.ID {
		t.Fatalf("after the failure: %s held by %s", cv.State, cv.RunnerID)
	}
	// The same process does not loop on it: it was tried here.
	if id, err := first.RunOnce(ctx); id != "" || err != nil {
		t.Fatalf("the failing process took it again: %q %v", id, err)
	}
	second := &Agent{Client: c.WithKey(run.APIKey), Engine: fakeEngine{}, WorkDir: t.TempDir()}
	if id, err := second.RunOnce(ctx); id != claim.ID || err != nil {
		t.Fatalf("second process: %q %v; want it to take up %s", id, err, claim.ID)
	}
	if cv, _ := c.Claim(ctx, claim.ID); cv.RunID == "" {
		t.Fatalf("held job not published: %s", cv.State)
	}
	if id, err := second.RunOnce(ctx); id != "" || err != nil {
		t.Fatalf("nothing left, got %q %v", id, err)
	}
}

// TestAcceptWhoseAnswerWasLost: the first POST /jobs/{id}/accept commits
// but its answer is lost (a proxy answers 502, as HAProxy does for a server
// killed mid-request); the client's retry is then refused as a conflict
// ("already accepted by you"). The runner sees from the claim that the job
// is its own and does it, instead of giving up a job it holds.
func TestAcceptWhoseAnswerWasLost(t *testing.T) {
	ctx := context.Background()
	c := testServer(t)
	sub, run := submitterAndRunner(t, c)
	claim, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON("lost answer"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(c.Server())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var lost atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/accept") && lost.CompareAndSwap(false, true) {
			proxy.ServeHTTP(httptest.NewRecorder(), r) // applied; the answer goes nowhere
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	fc, err := client.New(front.URL, run.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	fc.Backoff = time.Millisecond
	a := &Agent{Client: fc, Engine: fakeEngine{}, WorkDir: t.TempDir()}
	if id, err := a.RunOnce(ctx); id != claim.ID || err != nil {
		t.Fatalf("RunOnce: %q %v", id, err)
	}
	if !lost.Load() {
		t.Fatal("the proxy lost no answer")
	}
	if cv, _ := c.Claim(ctx, claim.ID); cv.RunID == "" {
		t.Fatalf("the job was not done: %s", cv.State)
	}
}
