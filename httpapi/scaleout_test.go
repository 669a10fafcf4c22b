package httpapi_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// Two API servers on one PostgreSQL database, each with its own store (its
// own pool and listener), as two `dotlab serve` processes would be: what
// one writes must reach the other's read cache and live streams through
// LISTEN/NOTIFY (docs/protocol.md §9). Their fallback poll is an hour, so
// nothing here can arrive by it.

// seen counts the changes a store delivered, per claim, to a subscriber
// registered after the server's own (so the server has applied a change
// when seen has it). The tests write through B only, so that A sees each
// write once, by its notification (a write through A would be delivered to
// A twice: after its commit, and again by its own notification).
type seen struct {
	mu     sync.Mutex
	claims map[string]int // claim changes (not room-only)
	any    map[string]int
	wake   chan struct{}
}

func watch(db *sqlstore.DB) *seen {
	s := &seen{claims: map[string]int{}, any: map[string]int{}, wake: make(chan struct{}, 1)}
	db.Subscribe(func(ch dotlab.Change) {
		s.mu.Lock()
		if !ch.Room {
			s.claims[ch.ClaimID]++
		}
		s.any[ch.ClaimID]++
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	})
	return s
}

func (s *seen) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[id]
}

// waitFor waits until at least n claim changes of id were delivered.
func (s *seen) waitFor(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for s.count(id) < n {
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("%s: %d claim changes delivered in 10 s, want %d", id, s.count(id), n)
		}
	}
}

type pair struct {
	a, b     *env
	dbA, dbB *sqlstore.DB
	seenA    *seen
	url      string
}

// newPair starts two servers on one fresh PostgreSQL schema.
func newPair(t *testing.T) *pair {
	url := sqlstoretest.URL(t, sqlstore.Postgres)
	clock := sqlstoretest.NewClock()
	p := &pair{url: url}
	open := func() (*env, *sqlstore.DB) {
		db, err := sqlstore.Open(context.Background(), url, sqlstore.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		api, err := httpapi.New(httpapi.Config{Store: db, Clock: clock, Version: "test", Leaks: leaks(t), EventPoll: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return &env{t: t, srv: newServer(t, api), clock: clock, db: db}, db
	}
	p.a, p.dbA = open()
	p.b, p.dbB = open()
	p.seenA = watch(p.dbA)
	for _, db := range []*sqlstore.DB{p.dbA, p.dbB} {
		deadline := time.Now().Add(30 * time.Second)
		for !db.Listening() {
			if time.Now().After(deadline) {
				t.Fatalf("listener not up in 30 s: %v", db.ListenerError())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return p
}

func claimView(t *testing.T, e *env, id string) apiv1.ClaimView {
	t.Helper()
	r := e.do("GET", "/api/v1/claims/"+id, "", nil)
	expect(t, r, 200, "")
	var c apiv1.ClaimView
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadCacheSeesOtherServersWrites: server A caches a claim; a change
// made through server B is what A serves right after B's notification
// reached A. A row changed behind the store's back (no announcement) stays
// as A cached it, which shows A answered from its cache.
func TestReadCacheSeesOtherServersWrites(t *testing.T) {
	p := newPair(t)
	_, subKey := p.b.register("submitter")
	runnerID, runnerKey := p.b.register("runner")
	id := p.b.submit(subKey, "cached across servers")
	p.seenA.waitFor(t, id, 1)
	if c := claimView(t, p.a, id); c.State != dotlab.StateFunded || c.RunnerID != "" {
		t.Fatalf("listed: %s %q", c.State, c.RunnerID)
	}
	manifest := p.a.do("GET", "/api/v1/claims/"+id+"/manifest", "", nil)
	expect(t, manifest, 200, "")

	raw, err := sql.Open("pgx", p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE claims SET title = 'changed behind the store' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if c := claimView(t, p.a, id); c.Title != "cached across servers" {
		t.Fatalf("A read the store again (title %q): no cache", c.Title)
	}
	if c := claimView(t, p.b, id); c.Title != "changed behind the store" {
		t.Fatalf("B's first read: title %q", c.Title)
	}

	n := p.seenA.count(id)
	expect(t, p.b.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
	p.seenA.waitFor(t, id, n+1)
	if c := claimView(t, p.a, id); c.RunnerID != runnerID || c.Title != "changed behind the store" {
		t.Fatalf("A after B's offer: runner %q title %q", c.RunnerID, c.Title)
	}
	expect(t, p.b.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 200, "")
	p.seenA.waitFor(t, id, n+2)
	if c := claimView(t, p.a, id); c.State != dotlab.StateAssigned {
		t.Fatalf("A after B's accept: %s", c.State)
	}
	if m := p.a.do("GET", "/api/v1/claims/"+id+"/manifest", "", nil); string(m.body) != string(manifest.body) {
		t.Fatal("the manifest changed")
	}
}

// TestReadCacheNeverStaleAfterNotification: while eight clients read a
// claim from server A as fast as they can (fills racing invalidations),
// server B changes it 24 times (offers and declines by 12 runners). After
// each change's notification reached A, A serves that change, never an
// older state.
func TestReadCacheNeverStaleAfterNotification(t *testing.T) {
	p := newPair(t)
	_, subKey := p.b.register("submitter")
	id := p.b.submit(subKey, "never stale")
	p.seenA.waitFor(t, id, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				res, err := p.a.srv.Client().Get(p.a.srv.URL + "/api/v1/claims/" + id)
				if err == nil {
					res.Body.Close()
					reads.Add(1)
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	n := p.seenA.count(id)
	for i := range 12 {
		runnerID, key := p.b.register("runner")
		expect(t, p.b.do("GET", "/api/v1/jobs/next", key, nil), 200, "")
		n++
		p.seenA.waitFor(t, id, n)
		if c := claimView(t, p.a, id); c.RunnerID != runnerID {
			t.Fatalf("change %d: A serves runner %q after the notification of the offer to %s", 2*i+1, c.RunnerID, runnerID)
		}
		expect(t, p.b.do("POST", "/api/v1/jobs/"+id+"/decline", key, map[string]string{"reason": "capability_mismatch"}), 200, "")
		n++
		p.seenA.waitFor(t, id, n)
		if c := claimView(t, p.a, id); c.RunnerID != "" {
			t.Fatalf("change %d: A serves runner %q after the notification of its decline", 2*i+2, c.RunnerID)
		}
	}
	if reads.Load() < 100 {
		t.Fatalf("only %d concurrent reads: the race was not exercised", reads.Load())
	}
}

// TestSettledRunCachedAcrossServers: a settled run is served from A's
// cache, and its logs, attached through B, show on A after the
// notification.
func TestSettledRunCachedAcrossServers(t *testing.T) {
	p := newPair(t)
	_, subKey := p.b.register("submitter")
	_, runnerKey := p.b.register("runner")
	id := p.b.assigned(subKey, runnerKey, "settled run") // listed, offered, accepted
	body := sqlstoretest.RunBody(id, "0", "0", dotlab.OutcomeSpecIssue)
	body.Comparisons = nil
	body.Notes = "results.json missing: analysis.py exited 1"
	logs := sqlstoretest.Logs(body)
	sum := sha256.Sum256(logs)
	body.LogsSHA256 = hex.EncodeToString(sum[:])
	r := p.b.do("POST", "/api/v1/runs", runnerKey, body)
	expect(t, r, 201, "")
	var run dotlab.Run
	json.Unmarshal(r.body, &run)
	p.seenA.waitFor(t, id, 4)
	get := func() dotlab.Run {
		r := p.a.do("GET", "/api/v1/runs/"+run.ID, "", nil)
		expect(t, r, 200, "")
		var got dotlab.Run
		json.Unmarshal(r.body, &got)
		return got
	}
	if got := get(); got.Status != dotlab.StateSettled || got.LogsUploadedAt != nil {
		t.Fatalf("settled run: %s %v", got.Status, got.LogsUploadedAt)
	}
	get() // served from A's cache from here on
	expect(t, p.b.do("PUT", "/api/v1/jobs/"+id+"/logs", runnerKey, logs), 200, "")
	p.seenA.waitFor(t, id, 5)
	if got := get(); got.LogsUploadedAt == nil {
		t.Fatal("A serves the run without the logs B attached, after the notification")
	}
}

// TestLiveEventsAcrossServers: a subscriber on A gets a message posted
// through B and a state change made through B at once; reconnecting to B
// with Last-Event-ID it resumes exactly after its last event.
func TestLiveEventsAcrossServers(t *testing.T) {
	p := newPair(t)
	_, subKey := p.a.register("submitter")
	_, runnerKey := p.a.register("runner")
	id := p.a.assigned(subKey, runnerKey, "live across servers")
	expect(t, p.a.do("POST", "/api/v1/labs/"+id+"/join", runnerKey, map[string]string{"role": "runner"}), 200, "")
	post := func(e *env, body string) {
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", runnerKey, map[string]any{"type": "note", "to": "all", "body": body}), 201, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, _ := openStream(t, ctx, p.a.srv.URL+"/api/v1/labs/"+id+"/events", "")
	for range 4 { // listed, funded, assigned, running
		next(t, ch)
	}
	start := time.Now()
	post(p.b, "m1")
	ev := next(t, ch)
	if ev.kind != "message" || !strings.Contains(ev.data, `"body":"m1"`) {
		t.Fatalf("on A: %+v", ev)
	}
	t.Logf("B's post reached A's subscriber in %v", time.Since(start))
	cancel()
	post(p.a, "m2")
	post(p.b, "m3")
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch2, _ := openStream(t, ctx2, p.b.srv.URL+"/api/v1/labs/"+id+"/events", ev.id)
	for _, want := range []string{"m2", "m3"} {
		if got := next(t, ch2); !strings.Contains(got.data, `"body":"`+want+`"`) {
			t.Fatalf("resumed on B: got %s, want %s", got.data, want)
		}
	}
	post(p.a, "m4")
	if got := next(t, ch2); !strings.Contains(got.data, `"body":"m4"`) {
		t.Fatalf("live on B after resuming: %s (a repeat or a loss)", got.data)
	}
	expect(t, p.a.do("POST", "/api/v1/runs", runnerKey, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)), 201, "")
	for _, want := range []string{"published", "challenge_window"} {
		if got := next(t, ch2); got.kind != "state" || !strings.Contains(got.data, `"state":"`+want+`"`) {
			t.Fatalf("state on B from A's publish: %+v, want %s", got, want)
		}
	}
}

// TestLiveEventsRecoverAfterListenerLoss: A's listening connection is cut
// (its backend terminated); a message posted through B meanwhile still
// reaches A's subscriber, by the resync A makes once it listens again, not
// by the (hour-long) poll.
func TestLiveEventsRecoverAfterListenerLoss(t *testing.T) {
	p := newPair(t)
	_, subKey := p.a.register("submitter")
	_, runnerKey := p.a.register("runner")
	id := p.a.assigned(subKey, runnerKey, "listener loss")
	expect(t, p.a.do("POST", "/api/v1/labs/"+id+"/join", runnerKey, map[string]string{"role": "runner"}), 200, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := openStream(t, ctx, p.a.srv.URL+"/api/v1/labs/"+id+"/events", "")
	for range 4 {
		next(t, ch)
	}
	claimView(t, p.a, id) // cached on A
	admin, err := sql.Open("pgx", sqlstoretest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, p.dbA.ListenerName()); err != nil {
		t.Fatal(err)
	}
	expect(t, p.b.do("POST", "/api/v1/labs/"+id+"/messages", runnerKey, map[string]any{"type": "note", "to": "all", "body": "during the outage"}), 201, "")
	expect(t, p.b.do("POST", "/api/v1/runs", runnerKey, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)), 201, "")
	if ev := next(t, ch); !strings.Contains(ev.data, `"body":"during the outage"`) {
		t.Fatalf("after the listener's loss: %+v", ev)
	}
	deadline := time.Now().Add(10 * time.Second)
	for claimView(t, p.a, id).State != dotlab.StateChallengeWindow {
		if time.Now().After(deadline) {
			t.Fatal("A still serves the claim as it was before B published, 10 s after")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInProcessAnnouncementsOnSQLite: on SQLite (one process) a change the
// store makes outside the handlers (the settlement clock expiring an
// offer) wakes the live stream and invalidates the cache at once, with the
// poll an hour away.
func TestInProcessAnnouncementsOnSQLite(t *testing.T) {
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.EventPoll = time.Hour })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	id := e.submit(subKey, "sqlite in process")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := openStream(t, ctx, e.srv.URL+"/api/v1/labs/"+id+"/events", "")
	next(t, ch) // listed
	next(t, ch) // funded
	expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
	if c := claimView(t, e, id); c.RunnerID == "" {
		t.Fatal("offer not shown")
	}
	e.clock.Advance(dotlab.DefaultWindows.Accept + time.Second)
	if rep, err := sqlstoretest.Protocol(e.db).Settle(context.Background()); err != nil || rep.OffersExpired != 1 {
		t.Fatalf("settle: %+v %v", rep, err)
	}
	if c := claimView(t, e, id); c.RunnerID != "" || c.OfferExpiresAt != nil {
		t.Fatalf("cached offer served after it expired: runner %q", c.RunnerID)
	}
	// Abandoning a job records a state change: it is streamed at once.
	expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 204, "") // never offered the same claim twice
	_, r2 := e.register("runner 2")
	expect(t, e.do("GET", "/api/v1/jobs/next", r2, nil), 200, "")
	expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", r2, nil), 200, "")
	if ev := next(t, ch); !strings.Contains(ev.data, `"state":"assigned"`) {
		t.Fatalf("accept: %+v", ev)
	}
	e.clock.Advance(dotlab.DefaultWindows.Publish + time.Second)
	if _, err := sqlstoretest.Protocol(e.db).Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); !strings.Contains(ev.data, `"state":"funded"`) {
		t.Fatalf("abandoned by the settlement clock: %+v", ev)
	}
}
