package clustertest

import (
	"context"
	"fmt"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/cluster"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/tlogcheck"
	"github.com/dotlab/dotlab/sqlstore"
)

const (
	crashWrites  = 10000 // acknowledged lab messages
	crashWriters = 64    // agents posting at once
	crashRooms   = 16    // lab rooms they post to
	crashKillAt  = 4000  // acknowledged writes before the kill
	crashWindow  = 3 * time.Second
	crashDown    = crashWindow + 3*time.Second // how long the killed server stays down
)

// TestCrashSQLite (docs/deploy.md): one `dotlab serve` on SQLite
// behind HAProxy is killed with SIGKILL while 64 agents post lab messages
// (each a protocol record with its transparency-log entry) through the
// balancer, restarted after 6 s, and the posting goes on until 10,000 were
// acknowledged (2xx with the message's id). See crashTest for what is
// checked.
func TestCrashSQLite(t *testing.T) {
	testfix.Exclusive(t)
	needHAProxy(t)
	crashTest(t, sqlstoretest.URL(t, sqlstore.SQLite), 1)
}

// TestCrashPostgres: the same with three servers on one PostgreSQL, one of
// them killed and restarted while the other two go on serving.
func TestCrashPostgres(t *testing.T) {
	testfix.Exclusive(t)
	needHAProxy(t)
	crashTest(t, sqlstoretest.URL(t, sqlstore.Postgres), 3)
}

// crashTest kills one of n servers on db mid-stream and checks, after the
// restart: every acknowledged message is served with its id, seq, author
// and body; every room's seqs run 1..n with no gap and no message nobody
// sent; `dotlab verify` passes for every room (each message's log entry and
// inclusion proof, every entry's record, the log consistent with the
// checkpoint it saw before the kill); the whole log verifies with a
// verifier of third-party code only and is consistent with the tree read
// before the kill; the log has one entry per record with no gap; and what
// fell due while the server was down (an ignored offer, a missed publish
// deadline, a closed challenge window, each set up just before the kill)
// was done exactly once, after the kill. 5xx answers are allowed only
// around the kill: from the killed server, or none available (SQLite).
func crashTest(t *testing.T, db string, n int) {
	if testing.Short() {
		t.Skip("-short: 10,000 writes and a restart")
	}
	url := db
	if strings.HasPrefix(db, "postgres") {
		url += "&pool_max_conns=8" // PostgreSQL's 100 connections are shared with other tests
	}
	w := crashWindow.String()
	servers, lb := startCluster(t, url, n, "--accept-window", w, "--publish-window", w, "--challenge-window", w,
		"--settle-every", "200ms", "--rate-agent", "0", "--rate-anon", "0")
	victim := servers[len(servers)-1]
	cw := setupCrash(t, lb.URL())
	st := &stream{sent: map[string]bool{}, errs: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); st.run(ctx, lb.URL(), cw.writers) }()

	st.waitAcked(t, crashKillAt/4)
	verifyCfg := t.TempDir()
	t0 := time.Now()
	before := cw.pinLog(t, verifyCfg)
	t.Logf("log pinned at %d entries in %s", before.Size, time.Since(t0).Round(time.Millisecond))
	st.waitAcked(t, crashKillAt)
	due := cw.setUpDue(t)
	killed := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	ackedAtKill := st.acked.Load()
	time.Sleep(crashDown)
	restarted := time.Now() // the process starts; its first sweep runs before it answers
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ackedAtRestart := st.acked.Load()
	t.Logf("killed %s at %d acknowledged writes, restarted %s later at %d", victim.Name, ackedAtKill,
		time.Since(killed).Round(time.Millisecond), ackedAtRestart)
	// Go on until crashWrites were acknowledged, and at least 1,000 after the restart.
	st.waitAcked(t, max(crashWrites, ackedAtRestart+1000))
	st.stop.Store(true)
	<-done
	// Requests in flight on the killed server get no answer: haproxy closes
	// their client connections without one (and logs nothing for them).
	t.Logf("%d writes acknowledged, %d sent; failures: %v (first without an answer: %v)", st.acked.Load(), len(st.sent), st.errs, st.connErr)

	cw.checkMessages(t, st)
	for _, room := range cw.rooms {
		if out, errOut, code := cli(t, verifyCfg, "verify", room, "--server", lb.URL()); code != 0 {
			t.Errorf("dotlab verify %s after the crash: %d\n%s%s", room, code, out, errOut)
		}
	}
	cw.checkLog(t, openRaw(t, db), before)
	since := killed
	if n == 1 {
		since = restarted // no other server ran while it was down
	}
	checkDue(t, openRaw(t, db), due, since)
	checkCrashStatuses(t, lb, victim.Name, killed, restarted)
}

// crashWorld is the crash test's agents and claims.
type crashWorld struct {
	c       *client.Client
	status  *apiv1.Status
	rooms   []string  // claims whose rooms get the messages (requires gpu: no runner draws them)
	writers []writer  // posting agents, each a member of one room
	runners [3]string // keys of the runners that set up what falls due
}

type writer struct{ id, key, room string }

// setupCrash registers a submitter, three runners and the writers, lists
// three claims for the runners and crashRooms claims needing a gpu (so no
// runner draws them), and makes each writer a collaborator in one room.
func setupCrash(t *testing.T, base string) *crashWorld {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(base, "")
	if err != nil {
		t.Fatal(err)
	}
	cw := &crashWorld{c: c}
	if cw.status, err = c.Status(ctx); err != nil || cw.status.Log == nil {
		t.Fatalf("status: %+v %v", cw.status, err)
	}
	reg := func(name string) (string, string) {
		a, err := c.Register(ctx, dotlab.NewAgent{Name: name, Operator: "crash test"})
		if err != nil {
			t.Fatal(err)
		}
		return a.ID, a.APIKey
	}
	_, subKey := reg("submitter")
	sub := c.WithKey(subKey)
	for i := range 3 {
		_, cw.runners[i] = reg(fmt.Sprintf("runner-%d", i))
		if _, err := sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON(fmt.Sprintf("falls due %d", i)), "statistics"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range crashRooms {
		v, err := sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON(fmt.Sprintf("room %d", i), "gpu"), "statistics")
		if err != nil {
			t.Fatal(err)
		}
		cw.rooms = append(cw.rooms, v.ID)
	}
	for i := range crashWriters {
		id, key := reg(fmt.Sprintf("writer-%02d", i))
		room := cw.rooms[i%crashRooms]
		if _, err := c.WithKey(key).JoinLab(ctx, room, dotlab.RoleCollaborator); err != nil {
			t.Fatal(err)
		}
		cw.writers = append(cw.writers, writer{id, key, room})
	}
	return cw
}

// pinLog verifies one room with `dotlab verify` (which keeps the
// checkpoint it saw in cfg) and reads the whole log with the third-party
// verifier, while the writes go on.
func (cw *crashWorld) pinLog(t *testing.T, cfg string) *tlogcheck.Tree {
	t.Helper()
	if out, errOut, code := cli(t, cfg, "verify", cw.rooms[0], "--server", cw.c.Server()); code != 0 {
		t.Fatalf("dotlab verify before the crash: %d\n%s%s", code, out, errOut)
	}
	tree, err := tlogcheck.Fetch(context.Background(), http.DefaultClient, cw.c.Server()+"/log/", cw.status.Log.VerifierKey)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// dueItems are the claims set up to fall due while the server is down.
type dueItems struct{ offered, accepted, published string }

// setUpDue, just before the kill: runner 0 takes a job and publishes a
// run (its challenge window then closes in crashWindow), runner 1 accepts
// a job and never publishes (its publish deadline passes), runner 2 draws
// and never accepts (its offer expires).
func (cw *crashWorld) setUpDue(t *testing.T) dueItems {
	t.Helper()
	ctx := context.Background()
	var d dueItems
	take := func(i int, accept bool) string {
		r := cw.c.WithKey(cw.runners[i])
		j, err := r.NextJob(ctx)
		if err != nil {
			t.Fatalf("runner %d: next job: %v", i, err)
		}
		if accept {
			if _, err := r.Accept(ctx, j.ClaimID); err != nil {
				t.Fatal(err)
			}
		}
		return j.ClaimID
	}
	d.published = take(0, true)
	if _, err := cw.c.WithKey(cw.runners[0]).PublishRun(ctx, sqlstoretest.RunBody(d.published, "1.58", "1.17", dotlab.OutcomeReproduced)); err != nil {
		t.Fatal(err)
	}
	d.accepted = take(1, true)
	d.offered = take(2, false)
	return d
}

// ack is one acknowledged message as its POST answered.
type ack struct {
	room, id, agent, body string
	seq                   int64
}

// stream is the write load: writers post until stopped, each answer
// counted.
type stream struct {
	stop    atomic.Bool
	acked   atomic.Int64
	mu      sync.Mutex
	acks    []ack
	sent    map[string]bool // every body sent, acknowledged or not
	errs    map[string]int  // failures by status ("conn" when no answer)
	connErr error           // the first request that got no answer
}

func (st *stream) run(ctx context.Context, base string, writers []writer) {
	var wg sync.WaitGroup
	for i, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			for n := 0; ctx.Err() == nil && !st.stop.Load(); n++ {
				st.post(hc, base, w, fmt.Sprintf("crash test message %d of writer %d", n, i))
			}
		}()
	}
	wg.Wait()
}

func (st *stream) post(hc *http.Client, base string, w writer, body string) {
	st.mu.Lock()
	st.sent[body] = true
	st.mu.Unlock()
	var m dotlab.LabMessage
	status, err := call(hc, "POST", base+"/api/v1/labs/"+w.room+"/messages", w.key, dotlab.LabMessageBody{Type: "note", To: "all", Body: body}, &m)
	ok := err == nil && status == http.StatusCreated && m.ID != ""
	st.mu.Lock()
	switch {
	case ok:
		st.acks = append(st.acks, ack{room: w.room, id: m.ID, agent: m.AgentID, body: m.Body, seq: m.Seq})
		st.acked.Add(1)
	case status == 0:
		st.errs["conn"]++
		if st.connErr == nil {
			st.connErr = err
		}
	default:
		st.errs[fmt.Sprint(status)]++
	}
	st.mu.Unlock()
	if !ok {
		time.Sleep(20 * time.Millisecond) // the server may be down
	}
}

func (st *stream) waitAcked(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for st.acked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writes acknowledged after 5 minutes (failures %v)", st.acked.Load(), n, st.errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkMessages reads every room back through the balancer: every
// acknowledged message is there as acknowledged, seqs run 1..n, and every
// message served is one a writer sent.
func (cw *crashWorld) checkMessages(t *testing.T, st *stream) {
	t.Helper()
	served := map[string]dotlab.LabMessage{}
	for _, room := range cw.rooms {
		after := ""
		var seq int64
		for {
			p, err := cw.c.Messages(context.Background(), room, after, 200)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range p.Messages {
				if seq++; m.Seq != seq {
					t.Fatalf("%s: message %s has seq %d, want %d (a gap or a repeat)", room, m.ID, m.Seq, seq)
				}
				if !st.sent[m.Body] {
					t.Errorf("%s: message %s %q was never sent", room, m.ID, m.Body)
				}
				served[m.ID] = m
			}
			if p.Next == "" || len(p.Messages) == 0 {
				break
			}
			after = p.Next
		}
	}
	lost := 0
	for _, a := range st.acks {
		m, ok := served[a.id]
		if !ok {
			lost++
			continue
		}
		if m.ClaimID != a.room || m.Seq != a.seq || m.AgentID != a.agent || m.Body != a.body {
			t.Errorf("acknowledged %+v, served %+v", a, m)
		}
	}
	t.Logf("%d messages served, %d acknowledged, %d acknowledged ones lost", len(served), len(st.acks), lost)
	if lost > 0 {
		t.Errorf("%d acknowledged messages lost", lost)
	}
}

// checkLog: the whole log verifies (third-party code only) and is
// consistent with the tree read before the kill; its head, its entries
// and its indexes agree; one message entry per message.
func (cw *crashWorld) checkLog(t *testing.T, db rawDB, before *tlogcheck.Tree) {
	t.Helper()
	after, err := tlogcheck.Fetch(context.Background(), http.DefaultClient, cw.c.Server()+"/log/", cw.status.Log.VerifierKey)
	if err != nil {
		t.Fatalf("the log after the crash: %v", err)
	}
	if err := after.CheckConsistency(before); err != nil {
		t.Errorf("the log after the crash is not consistent with the one before: %v", err)
	}
	var size, entries, maxIdx, msgEntries, msgs int
	if err := db.QueryRow(`SELECT (SELECT size FROM log_head), COUNT(*), COALESCE(MAX(idx), -1) + 1,
		(SELECT COUNT(*) FROM log_entries WHERE type = 'message'), (SELECT COUNT(*) FROM lab_messages) FROM log_entries`).Scan(&size, &entries, &maxIdx, &msgEntries, &msgs); err != nil {
		t.Fatal(err)
	}
	t.Logf("log: %d entries before the kill, %d after (served %d)", before.Size, size, after.Size)
	if size != entries || entries != maxIdx || int64(size) < after.Size || msgEntries != msgs {
		t.Errorf("log head %d, %d entries up to index %d, %d served; %d message entries for %d messages", size, entries, maxIdx, after.Size, msgEntries, msgs)
	}
	if db.sqlite {
		var ok string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			t.Errorf("SQLite integrity_check: %q %v", ok, err)
		}
	}
}

// checkDue: each claim set up to fall due had it done exactly once, after
// since: the ignored offer expired (the claim back in the pool), the missed
// deadline abandoned, the closed window settled (one settled event, one
// settlement log entry).
func checkDue(t *testing.T, db rawDB, d dueItems, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		if err := db.QueryRow(`SELECT state FROM claims WHERE id = $1`, d.published).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state == string(dotlab.StateSettled) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	job := func(claim, state string) {
		t.Helper()
		var n int
		var closed int64
		if err := db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(closed_at), 0) FROM jobs WHERE claim_id = $1 AND state = $2`, claim, state).Scan(&n, &closed); err != nil {
			t.Fatal(err)
		}
		if n != 1 || closed < since.UnixMilli() {
			t.Errorf("%s: %d %s job(s), closed at %s; want one, after %s", claim, n, state, time.UnixMilli(closed), since)
		}
		var runner *string
		if err := db.QueryRow(`SELECT state, runner_id FROM claims WHERE id = $1`, claim).Scan(&state, &runner); err != nil {
			t.Fatal(err)
		}
		if state != string(dotlab.StateFunded) || runner != nil {
			t.Errorf("%s: %s with runner %v, want back in the pool (funded, no runner)", claim, state, runner)
		}
	}
	job(d.offered, "expired")
	job(d.accepted, "abandoned")
	var state, outcome string
	var settledAt int64
	var events, entries int
	if err := db.QueryRow(`SELECT state, COALESCE(outcome, ''), COALESCE(settled_at, 0),
		(SELECT COUNT(*) FROM claim_events WHERE claim_id = $1 AND state = 'settled'),
		(SELECT COUNT(*) FROM log_entries WHERE claim_id = $1 AND type = 'settlement') FROM claims WHERE id = $1`, d.published).
		Scan(&state, &outcome, &settledAt, &events, &entries); err != nil {
		t.Fatal(err)
	}
	if state != string(dotlab.StateSettled) || outcome != string(dotlab.OutcomeReproduced) || settledAt < since.UnixMilli() || events != 1 || entries != 1 {
		t.Errorf("%s: %s %s at %s, %d settled events, %d settlement entries; want settled reproduced once, after %s",
			d.published, state, outcome, time.UnixMilli(settledAt), events, entries, since)
	}
}

// checkCrashStatuses: every 5xx (or unanswered) request the balancer
// logged came from the killed server or found no server up, between the
// kill and a few seconds after the restart.
func checkCrashStatuses(t *testing.T, lb *cluster.HAProxy, victim string, killed, restarted time.Time) {
	t.Helper()
	by, bad := statuses(t, lb)
	t.Logf("balancer answers: %v", by)
	var outside []cluster.Request
	for _, r := range bad {
		// In flight at the kill (the clients wait 30 s at most), or sent
		// before the balancer saw the restarted server up.
		inWindow := !r.Accepted.Before(killed.Add(-30*time.Second)) && r.Accepted.Before(restarted.Add(5*time.Second))
		if (r.Server != victim && r.Server != "<NOSRV>") || !inWindow {
			outside = append(outside, r)
		}
	}
	reportBad(t, outside, "outside the crash")
}
