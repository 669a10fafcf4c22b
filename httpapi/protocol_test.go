package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// assigned submits a claim and has the runner draw and accept it.
func (e *env) assigned(subKey, runnerKey, title string) string {
	e.t.Helper()
	id := e.submit(subKey, title)
	if r := e.do("GET", "/api/v1/jobs/next", runnerKey, nil); r.status != 200 {
		e.t.Fatalf("next: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil); r.status != 200 {
		e.t.Fatalf("accept: %d %s", r.status, r.body)
	}
	return id
}

func TestChallengesDisputesAndRoomsOverHTTP(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, chKey := e.register("challenger")
		_, helperKey := e.register("helper")
		_, strangerKey := e.register("stranger")
		id := e.assigned(subKey, runnerKey, "http dispute")

		// Rooms: runner joins as runner, helper as collaborator, the
		// submitter as submitter (it asks for collaborator; it never runs).
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", runnerKey, map[string]string{"role": "runner"}), 200, "")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", helperKey, map[string]string{"role": "runner"}), 403, "role_conflict")
		r := e.do("POST", "/api/v1/labs/"+id+"/join", subKey, map[string]string{"role": "collaborator"})
		if expect(t, r, 200, ""); !strings.Contains(string(r.body), `"role":"submitter"`) {
			t.Fatalf("submitter's membership: %s", r.body)
		}
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", subKey, map[string]string{"role": "runner"}), 403, "role_conflict")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", helperKey, map[string]string{"role": "collaborator"}), 200, "")
		msg := map[string]any{"type": "finding", "to": "all", "body": "sd_diff is 1.2299 dividing by n-1; sha256 of sleep.csv is " + sqlstoretest.DataSHA256, "refs": []string{"logs.jsonl:12"}}
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", strangerKey, msg), 403, "not_member")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", helperKey, msg), 201, "")
		// A key pasted into the room is rejected, naming the rule, not echoing it.
		leak := map[string]any{"type": "note", "to": "all", "body": "use this: ghp_R8kq2Lm9Zt4Wx7Vb1Nc6Hy3Jp0Qs5Df8Ga2K"}
		r = e.do("POST", "/api/v1/labs/"+id+"/messages", helperKey, leak)
		expect(t, r, 422, "invalid")
		if d := r.err().Detail[0]; !strings.Contains(d, "github-pat") || strings.Contains(d, "R8kq2Lm9") {
			t.Fatalf("leak detail: %q", d)
		}
		// Public reading, no key needed.
		r = e.do("GET", "/api/v1/labs/"+id+"/messages", "", nil)
		var page apiv1.MessagePage
		json.Unmarshal(r.body, &page)
		if r.status != 200 || len(page.Messages) != 1 || page.Messages[0].Refs[0] != "logs.jsonl:12" {
			t.Fatalf("messages: %d %s", r.status, r.body)
		}
		expect(t, e.do("GET", "/api/v1/labs/"+id+"/messages?after="+page.Messages[0].ID, "", nil), 200, "")
		expect(t, e.do("GET", "/api/v1/labs/"+id+"/messages?after=msg_nope", "", nil), 404, "not_found")

		// Run notes that leak a key are rejected too.
		body := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
		body.Notes = "AWS key AKIAZ7Q4MX2LPJRT3WKD"
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 422, "invalid")
		body.Notes = "credit: helper cross-checked the sd"
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 201, "")

		// Challenges: collaborator 403, disagreement without numbers 422, then OK (run_id form).
		ch := map[string]any{"claim_id": id, "agrees": false, "input_hashes": body.InputHashes, "output_hashes": body.OutputHashes,
			"environment": body.Environment, "comparisons": []map[string]any{{"name": "mean_diff", "rerun": 1.58}, {"name": "sd_diff", "rerun": 1.17}},
			"outcome": "reproduced", "notes": "sd_diff differs"}
		expect(t, e.do("POST", "/api/v1/challenges", helperKey, ch), 403, "role_conflict")
		expect(t, e.do("POST", "/api/v1/challenges", chKey, ch), 422, "invalid")
		ch["notes"] = "sd_diff: 1.17 (divide by n) vs the run's 1.2299, difference 0.0599"
		ch["agrees"] = true
		expect(t, e.do("POST", "/api/v1/challenges", chKey, ch), 422, "invalid")
		ch["agrees"] = false
		expect(t, e.do("POST", "/api/v1/challenges", chKey, ch), 201, "")
		expect(t, e.do("POST", "/api/v1/challenges", chKey, ch), 409, "conflict")

		// Disputes: the challenger gets 204; reviewers vote; the majority settles.
		if r := e.do("GET", "/api/v1/disputes/next", chKey, nil); r.status != 204 {
			t.Fatalf("challenger offered its own dispute: %d", r.status)
		}
		var outcome dotlab.Outcome
		for i, v := range []string{"challenger", "challenger", "runner"} {
			_, key := e.register(fmt.Sprintf("reviewer%d", i))
			r := e.do("GET", "/api/v1/disputes/next", key, nil)
			var d dotlab.Dispute
			json.Unmarshal(r.body, &d)
			if r.status != 200 || d.ID != id || len(d.Challenges) != 1 || len(d.Votes) != i {
				t.Fatalf("dispute for reviewer %d: %d %s", i, r.status, r.body)
			}
			expect(t, e.do("POST", "/api/v1/disputes/"+id+"/vote", key, map[string]string{"vote": v, "rationale": "short"}), 422, "invalid")
			r = e.do("POST", "/api/v1/disputes/"+id+"/vote", key, map[string]string{"vote": v, "rationale": "sd_diff: Student divides by n, so 1.17 is the published quantity"})
			expect(t, r, 200, "")
			json.Unmarshal(r.body, &d)
			outcome = d.Claim.Outcome
		}
		if outcome != dotlab.OutcomeReproduced {
			t.Fatalf("final outcome %q, want reproduced (the challenger's side)", outcome)
		}
		var c apiv1.ClaimView
		json.Unmarshal(e.do("GET", "/api/v1/claims/"+id, "", nil).body, &c)
		if c.State != dotlab.StateSettled {
			t.Fatalf("claim state %s", c.State)
		}
	})
}

func TestRateLimit(t *testing.T) {
	clock := sqlstoretest.NewClock()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{Clock: clock})
	api, err := httpapi.New(httpapi.Config{Store: db, Clock: clock, Leaks: leaks(t),
		AgentLimit: httpapi.RateLimit{PerSecond: 1, Burst: 2}, AnonymousLimit: httpapi.RateLimit{PerSecond: 0.5, Burst: 3}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, clock: clock, db: db}
	e.srv = newServer(t, api)
	_, key := e.register("a") // 1 of the address's 3
	for i := 0; i < 2; i++ {
		expect(t, e.do("GET", "/api/v1/status", "", nil), 200, "")
	}
	r := e.do("GET", "/api/v1/status", "", nil)
	expect(t, r, 429, "rate_limited")
	if r.header.Get("Retry-After") != "2" {
		t.Fatalf("Retry-After %q, want 2 (0.5/s)", r.header.Get("Retry-After"))
	}
	// Made-up keys share the address's bucket: inventing keys does not help.
	expect(t, e.do("GET", "/api/v1/status", "dlk_made_up", nil), 429, "rate_limited")
	// A key that authenticated gets its own bucket (1/s, burst 2). Its
	// first call still counts against the address, so let that refill.
	clock.Advance(2 * time.Second)
	expect(t, e.do("GET", "/api/v1/agents/me", key, nil), 200, "")
	expect(t, e.do("GET", "/api/v1/agents/me", key, nil), 200, "")
	expect(t, e.do("GET", "/api/v1/agents/me", key, nil), 200, "")
	expect(t, e.do("GET", "/api/v1/agents/me", key, nil), 429, "rate_limited")
	// Time refills the bucket.
	clock.Advance(2 * time.Second)
	expect(t, e.do("GET", "/api/v1/agents/me", key, nil), 200, "")
}

// sseClient reads events from a lab stream.
type sseEvent struct{ id, kind, data string }

func openStream(t *testing.T, ctx context.Context, url, lastID string) (<-chan sseEvent, *http.Response) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return ch, res
}

func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("stream closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	return sseEvent{}
}

func TestLabEventsLiveAndResumable(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		id := e.assigned(subKey, runnerKey, "live")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", runnerKey, map[string]string{"role": "runner"}), 200, "")
		post := func(body string) {
			expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", runnerKey, map[string]any{"type": "note", "to": "all", "body": body}), 201, "")
		}
		post("m1")
		ctx, cancel := context.WithCancel(context.Background())
		ch, _ := openStream(t, ctx, e.srv.URL+"/api/v1/labs/"+id+"/events", "")
		// Backlog: m1 and the states so far (listed, funded, assigned, running).
		var last sseEvent
		seen := map[string]int{}
		for i := 0; i < 5; i++ {
			last = next(t, ch)
			seen[last.kind]++
		}
		if seen["message"] != 1 || seen["state"] != 4 {
			t.Fatalf("backlog: %v", seen)
		}
		post("m2")
		ev := next(t, ch)
		if ev.kind != "message" || !strings.Contains(ev.data, `"body":"m2"`) {
			t.Fatalf("live: %+v", ev)
		}
		cancel() // the connection drops
		post("m3")
		post("m4")
		// Reconnect with the last id: m3, m4 exactly once, then live m5.
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		ch2, _ := openStream(t, ctx2, e.srv.URL+"/api/v1/labs/"+id+"/events", ev.id)
		for _, want := range []string{"m3", "m4"} {
			got := next(t, ch2)
			if !strings.Contains(got.data, `"body":"`+want+`"`) {
				t.Fatalf("resume: got %s, want %s", got.data, want)
			}
		}
		post("m5")
		if got := next(t, ch2); !strings.Contains(got.data, `"body":"m5"`) {
			t.Fatalf("after resume: %s", got.data)
		}
		// A state change arrives live too.
		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 201, "")
		for _, want := range []string{"published", "challenge_window"} {
			got := next(t, ch2)
			if got.kind != "state" || !strings.Contains(got.data, `"state":"`+want+`"`) {
				t.Fatalf("state event: %+v, want %s", got, want)
			}
		}
	})
}

// TestRateLimitBehindTrustedProxy: requests from a trusted proxy are
// limited by the client its X-Forwarded-For names (its rightmost entry
// that is not a trusted proxy), so two clients behind one balancer do not
// share a bucket; entries a client added itself (left of the proxy's) do
// not move it to another bucket; a peer that is not trusted is limited by
// its own address whatever the header says.
func TestRateLimitBehindTrustedProxy(t *testing.T) {
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	api, err := httpapi.New(httpapi.Config{Store: db, Leaks: leaks(t), AnonymousLimit: httpapi.RateLimit{PerSecond: 0.001, Burst: 1},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	status := func(peer string, xff ...string) int { return statusFrom(api, peer+":40000", xff...) }
	steps := []struct {
		peer string
		xff  []string
		want int
	}{
		{"10.0.0.5", []string{"198.51.100.1"}, 200},
		{"10.0.0.6", []string{"198.51.100.1"}, 429},                // same client, another balancer
		{"10.0.0.5", []string{"198.51.100.2"}, 200},                // another client
		{"10.0.0.5", []string{"203.0.113.9, 198.51.100.2"}, 429},   // a forged left entry changes nothing
		{"10.0.0.5", []string{"203.0.113.9", "198.51.100.2"}, 429}, // nor as two header lines
		{"10.0.0.5", []string{"198.51.100.3, 10.0.0.7"}, 200},      // a chain of trusted proxies
		{"192.0.2.1", []string{"198.51.100.4"}, 200},               // an untrusted peer: its own bucket
		{"192.0.2.1", []string{"198.51.100.5"}, 429},               // whatever it claims
	}
	for i, s := range steps {
		if got := status(s.peer, s.xff...); got != s.want {
			t.Errorf("%d: from %s with X-Forwarded-For %q: %d, want %d", i, s.peer, s.xff, got, s.want)
		}
	}
}

// TestRateLimitByIPv6Network: an IPv6 client is limited by its /64, the
// network one host is given (RFC 6177's smallest end-site assignment), not
// by its address, of which it can use 2^64: one bucket per address let a
// single host make unlimited anonymous calls (POST /agents among them:
// agents without end). IPv4, and IPv4 mapped into IPv6, stay per address;
// behind a trusted proxy the X-Forwarded-For client is masked the same way.
func TestRateLimitByIPv6Network(t *testing.T) {
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	api, err := httpapi.New(httpapi.Config{Store: db, Leaks: leaks(t), AnonymousLimit: httpapi.RateLimit{PerSecond: 0.001, Burst: 1},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	status := func(peer string, xff ...string) int { return statusFrom(api, peer, xff...) }
	steps := []struct {
		peer string
		xff  []string
		want int
	}{
		{"[2001:db8:1:2::1]:40000", nil, 200},
		{"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:40000", nil, 429}, // same /64, another address
		{"[2001:db8:1:3::1]:40000", nil, 200},                  // another /64
		{"10.0.0.5:40000", []string{"2001:db8:9:9::1"}, 200},
		{"10.0.0.5:40000", []string{"2001:db8:9:9::2"}, 429}, // behind the balancer too
		{"[::ffff:198.51.100.7]:40000", nil, 200},            // IPv4 in IPv6: per IPv4 address
		{"198.51.100.7:40000", nil, 429},
		{"198.51.100.8:40000", nil, 200},
	}
	for i, s := range steps {
		if got := status(s.peer, s.xff...); got != s.want {
			t.Errorf("%d: from %s with X-Forwarded-For %q: %d, want %d", i, s.peer, s.xff, got, s.want)
		}
	}
}

// statusFrom is the status code of GET /api/v1/status sent to api from the
// peer address peer (HOST:PORT) with the X-Forwarded-For header lines xff.
func statusFrom(api http.Handler, peer string, xff ...string) int {
	r := httptest.NewRequest("GET", "/api/v1/status", nil)
	r.RemoteAddr = peer
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	w := httptest.NewRecorder()
	api.ServeHTTP(w, r)
	return w.Code
}
