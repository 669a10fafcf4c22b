package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/mcpserver"
)

// TestMissingFeatureStopsTheTask: against a server without disputes (a
// real server behind a proxy that answers its routes as an older server
// would: 404 no_such_route), next_dispute is a tool error carrying the
// API's code and detail, stop_task and the skill's advice not to guess but
// to stop; other API errors pass their code and detail through unchanged.
func TestMissingFeatureStopsTheTask(t *testing.T) {
	srv := startServer(t)
	target, _ := url.Parse(srv.base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/disputes") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no_such_route","detail":["GET /api/v1/disputes/next: this route does not exist in DotLab's API v1, so the feature is not there"]}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(old.Close)
	sub := register(t, old.URL, "submitter", "")
	rev := register(t, old.URL, "reviewer", "")
	rec := &recorder{}
	s := connect(t, rev, rec, "--cache", t.TempDir())
	te := fails(s, "next_dispute", nil, dotlab.ENOSUCHROUTE)
	if !te.StopTask || te.Source != mcpserver.SourceServer || !strings.Contains(te.Advice, "stop") || !strings.Contains(te.Advice, "Do not guess") ||
		len(te.Detail) != 1 || !strings.Contains(te.Detail[0], "the feature is not there") {
		t.Fatalf("next_dispute on a server without disputes: %+v", te)
	}
	// The API's own errors: a job that is not offered (409) and an unknown claim (404 not_found).
	c, _ := client.New(old.URL, "")
	claim, err := c.WithKey(sub.key).SubmitClaim(context.Background(), sqlstoretest.ManifestJSON("errors"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	if te := fails(s, "accept_job", map[string]any{"claim_id": claim.ID}, dotlab.ENOTOFFERED); te.StopTask || te.Source != mcpserver.SourceServer || len(te.Detail) == 0 {
		t.Fatalf("accept_job without an offer: %+v", te)
	}
	if te := fails(s, "get_claim", map[string]any{"claim_id": "DL-9999"}, dotlab.ENOTFOUND); te.StopTask || !strings.Contains(te.Detail[0], "DL-9999") {
		t.Fatalf("get_claim of an unknown claim: %+v", te)
	}
	rec.noKeys(t, sub, rev)
}

// TestDeclineOnlyForCapabilityMismatch: an agent registered with gpu on a
// machine without one (agent.LocalCapabilities) is offered a claim that
// requires it, and declines it with capability_mismatch, free of cost.
func TestDeclineOnlyForCapabilityMismatch(t *testing.T) {
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		t.Skip("this machine has a GPU: the agent would have every capability the claim requires")
	}
	srv := startServer(t)
	sub := register(t, srv.base, "submitter", "")
	bot := register(t, srv.base, "no-gpu-here", "python,gpu")
	c, _ := client.New(srv.base, "")
	claim, err := c.WithKey(sub.key).SubmitClaim(context.Background(), sqlstoretest.ManifestJSON("needs a GPU", "gpu"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s := connect(t, bot, rec, "--cache", t.TempDir())
	job := ok[mcpserver.NextJobOutput](s, "next_job", nil)
	if job.Job == nil || job.Job.ClaimID != claim.ID || strings.Join(job.Job.Missing, ",") != "gpu" {
		t.Fatalf("next_job: %+v", job)
	}
	d := ok[mcpserver.JobView](s, "decline_job", map[string]any{"claim_id": claim.ID})
	if d.State != "declined" || d.Reason != dotlab.DeclineCapabilityMismatch {
		t.Fatalf("decline_job: %+v", d)
	}
	me, err := c.WithKey(bot.key).Me(context.Background())
	if err != nil || me.Declines[dotlab.DeclineCapabilityMismatch] != 1 {
		t.Fatalf("profile after the decline: %+v %v", me, err)
	}
	rec.noKeys(t, sub, bot)
}
