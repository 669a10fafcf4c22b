package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// recorder collects the changes a store delivers to a subscriber.
type recorder struct {
	mu   sync.Mutex
	got  []dotlab.Change
	wake chan struct{}
}

func record(db *sqlstore.DB) *recorder {
	r := &recorder{wake: make(chan struct{}, 1)}
	db.Subscribe(func(ch dotlab.Change) {
		r.mu.Lock()
		r.got = append(r.got, ch)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	})
	return r
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.got = nil
	r.mu.Unlock()
}

// has reports whether a change of claimID was delivered (room is whether a
// room-only change counts).
func (r *recorder) has(claimID string, room bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.got {
		if ch.ClaimID == claimID && (room || !ch.Room) {
			return true
		}
	}
	return false
}

// wait waits up to d for has(claimID, room).
func (r *recorder) wait(claimID string, room bool, d time.Duration) bool {
	deadline := time.After(d)
	for !r.has(claimID, room) {
		select {
		case <-r.wake:
		case <-deadline:
			return r.has(claimID, room)
		}
	}
	return true
}

func (r *recorder) resyncs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ch := range r.got {
		if ch.Resync() {
			n++
		}
	}
	return n
}

// TestAnnouncementsCoverEveryViewChange walks a claim through every path of
// its lifecycle; after each write whose effect shows in what GET
// /claims/{id} or GET /runs/{id} serve, the claim must have been announced
// to this process before the write returned and, on PostgreSQL, to a second
// store on the same database (another server process) through LISTEN; a
// message must be announced as a room change (docs/protocol.md §9).
func TestAnnouncementsCoverEveryViewChange(t *testing.T) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			ctx := context.Background()
			clock := sqlstoretest.NewClock()
			u := sqlstoretest.URL(t, e)
			db, err := sqlstore.Open(ctx, u, sqlstore.Options{Clock: clock, Windows: fast})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			local := record(db)
			var remote *recorder
			if e == sqlstore.Postgres {
				peer, err := sqlstore.Open(ctx, u, sqlstore.Options{Clock: clock, Windows: fast})
				if err != nil {
					t.Fatal(err)
				}
				defer peer.Close()
				remote = record(peer)
				waitListening(t, peer)
			}
			w := &world{t: t, db: db, clock: clock}
			w.sub = mustAgent(t, db, "submitter")
			view := func(id string) string {
				c, err := db.FindClaim(ctx, id)
				if err != nil {
					return ""
				}
				b, _ := json.Marshal(c)
				if c.RunID != "" {
					r, _ := db.FindRun(ctx, c.RunID)
					rb, _ := json.Marshal(r)
					b = append(b, rb...)
				}
				return string(b)
			}
			messages := func(id string) int {
				ms, _ := db.LabMessages(ctx, id, 0, 500)
				return len(ms)
			}
			var id string
			step := func(name string, fn func()) {
				t.Helper()
				local.reset()
				if remote != nil {
					remote.reset()
				}
				before, msgs := view(id), messages(id)
				fn()
				changed, posted := view(id) != before, messages(id) != msgs
				if !changed && !posted {
					t.Fatalf("%s: changed nothing the test can see", name)
				}
				if !local.has(id, !changed) {
					t.Errorf("%s: %s changed but this process was not told before the write returned (got %+v)", name, id, local.got)
				}
				if remote != nil && !remote.wait(id, !changed, 5*time.Second) {
					t.Errorf("%s: %s changed but the other process was not notified (got %+v)", name, id, remote.got)
				}
			}
			runners := []*dotlab.Agent{mustAgent(t, db, "r0"), mustAgent(t, db, "r1"), mustAgent(t, db, "r2")}
			draw := func(a *dotlab.Agent) {
				if j, found, err := sqlstoretest.Protocol(db).NextJob(ctx, a); err != nil || !found || j.ClaimID != id {
					t.Fatalf("draw: %+v %v %v", j, found, err)
				}
			}
			must := func(_ any, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}

			// Claim 1: offered, declined, offered, expired, offered,
			// accepted, room opened, a message, abandoned.
			step("list", func() {
				c, err := sqlstoretest.Protocol(db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(t, "announce 1"))
				must(c, err)
				id = c.ID
			})
			step("offer", func() { draw(runners[0]) })
			step("decline", func() { must(sqlstoretest.Protocol(db).DeclineJob(ctx, runners[0].ID, id, "busy")) })
			step("offer again", func() { draw(runners[1]) })
			step("offer expires", func() { clock.Advance(2 * time.Second); w.settle() })
			step("offer a third time", func() { draw(runners[2]) })
			step("accept", func() { must(sqlstoretest.Protocol(db).AcceptJob(ctx, runners[2].ID, id)) })
			step("join as runner", func() { must(sqlstoretest.Protocol(db).JoinLab(ctx, runners[2].ID, id, dotlab.RoleRunner)) })
			step("message", func() {
				must(sqlstoretest.Protocol(db).PostLabMessage(ctx, runners[2].ID, id, dotlab.LabMessageBody{Type: "note", To: "all", Body: "starting"}))
			})
			step("abandon", func() { clock.Advance(2 * time.Second); w.settle() })

			// Claim 2: published, logs attached, disputed, voted, settled by review.
			step("list 2", func() {
				c, err := sqlstoretest.Protocol(db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(t, "announce 2"))
				must(c, err)
				id = c.ID
			})
			// Claim 1 is back in the pool: draw with runners it was offered to
			// already (never offered again).
			step("offer 2", func() { draw(runners[0]) })
			step("accept 2", func() { must(sqlstoretest.Protocol(db).AcceptJob(ctx, runners[0].ID, id)) })
			body := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
			logs := sqlstoretest.Logs(body)
			body.LogsSHA256 = sha256Hex(logs)
			step("publish", func() { must(sqlstoretest.Protocol(db).PublishRun(ctx, runners[0], body, nil)) })
			step("logs", func() { must(sqlstoretest.Protocol(db).PutJobLogs(ctx, runners[0].ID, id, logs)) })
			challenger := mustAgent(t, db, "challenger")
			step("disagreeing challenge", func() {
				b := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: id, Agrees: agree(false)}
				b.Notes = "sd_diff: my rerun gives 1.17 (dividing by n); the run's 1.2299 differs by 0.0599"
				must(sqlstoretest.Protocol(db).CreateChallenge(ctx, challenger, b, nil))
			})
			rationale := "sd_diff: Student divides by n; 1.17 matches within 0.005, 1.2299 does not"
			for i := 0; i < 3; i++ {
				rev := mustAgent(t, db, "reviewer")
				if d, found, err := sqlstoretest.Protocol(db).NextDispute(ctx, rev.ID); err != nil || !found || d.ID != id {
					t.Fatalf("dispute draw: %v %v", found, err)
				}
				if i < 2 {
					must(sqlstoretest.Protocol(db).CastVote(ctx, rev, id, dotlab.VoteBody{Vote: "challenger", Rationale: rationale}))
					continue
				}
				step("quorum", func() {
					must(sqlstoretest.Protocol(db).CastVote(ctx, rev, id, dotlab.VoteBody{Vote: "challenger", Rationale: rationale}))
				})
			}

			// Claim 3: published, an agreeing challenge, the window closes.
			step("list 3", func() {
				c, err := sqlstoretest.Protocol(db).CreateClaim(ctx, w.sub.ID, sqlstoretest.NewClaim(t, "announce 3"))
				must(c, err)
				id = c.ID
			})
			r3 := runners[1]
			step("offer 3", func() { draw(r3) })
			step("accept 3", func() { must(sqlstoretest.Protocol(db).AcceptJob(ctx, r3.ID, id)) })
			step("publish 3", func() {
				must(sqlstoretest.Protocol(db).PublishRun(ctx, r3, sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced), nil))
			})
			local.reset()
			must(sqlstoretest.Protocol(db).CreateChallenge(ctx, mustAgent(t, db, "checker"),
				&dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.581", "1.171", dotlab.OutcomeReproduced), ClaimID: id, Agrees: agree(true)}, nil))
			if !local.has(id, false) {
				t.Errorf("agreeing challenge: not announced")
			}
			step("window closes", func() { clock.Advance(2 * time.Second); w.settle() })
		})
	}
}

// waitListening waits until db's listener holds its LISTEN.
func waitListening(t *testing.T, db *sqlstore.DB) {
	t.Helper()
	db.Subscribe(func(dotlab.Change) {})
	deadline := time.Now().Add(30 * time.Second)
	for !db.Listening() {
		if time.Now().After(deadline) {
			t.Fatalf("the listener did not connect in 30 s: %v", db.ListenerError())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestListenerReconnects: when the listening connection is cut (its
// backend terminated, as a PostgreSQL restart or a network failure would),
// the store announces a resync, stops reporting Listening, reconnects by
// itself, announces a resync again, and delivers later changes as before.
func TestListenerReconnects(t *testing.T) {
	ctx := context.Background()
	u := sqlstoretest.URL(t, sqlstore.Postgres)
	a, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := record(b)
	waitListening(t, b)
	first := rec.resyncs()
	if first != 1 {
		t.Fatalf("resyncs after the first connect: %d, want 1", first)
	}
	admin, err := sql.Open("pgx", sqlstoretest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// Only b listens (a never subscribed).
	res, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, b.ListenerName())
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("terminated %d listeners, want b's 1", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for rec.resyncs() < first+2 || !b.Listening() {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect in 30 s: %d resyncs, listening %v", rec.resyncs(), b.Listening())
		}
		time.Sleep(10 * time.Millisecond)
	}
	sub := mustAgent(t, a, "submitter")
	c, err := sqlstoretest.Protocol(a).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "after reconnect"))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.wait(c.ID, false, 5*time.Second) {
		t.Fatal("a change after the reconnect was not delivered")
	}
}

// TestOutboxLeftByDeadProcess: announcements a process committed into the
// outbox and never relayed (it died between its commit and its relay) reach
// another process's subscriber by that process's periodic relay, within
// twice RelayEvery (and 2 s at most on a loaded machine); nothing is left
// in the outbox. A live process's own write reaches the other process too.
func TestOutboxLeftByDeadProcess(t *testing.T) {
	ctx := context.Background()
	u := sqlstoretest.URL(t, sqlstore.Postgres)
	dead, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	live, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	rec := record(live)
	waitListening(t, live)
	raw, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	dead.StopRelay()
	sub := mustAgent(t, dead, "submitter")
	var ids []string
	for i := range 5 {
		c, err := sqlstoretest.Protocol(dead).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "left in the outbox "+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	var left int
	if err := raw.QueryRow(`SELECT count(*) FROM notify_outbox`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, id := range ids {
		if !rec.wait(id, false, 2*time.Second) {
			t.Fatalf("claim %s, left in the outbox (%d rows right after the commits), not delivered in 2 s", id, left)
		}
	}
	took := time.Since(start)
	t.Logf("%d outbox rows left by the dead process delivered in %s", left, took)
	if !testing.Short() && took > 2*sqlstore.RelayEvery+500*time.Millisecond {
		t.Errorf("delivered in %s, want within about 2 x %s", took, sqlstore.RelayEvery)
	}
	var after int
	if err := raw.QueryRow(`SELECT count(*) FROM notify_outbox`).Scan(&after); err != nil || after != 0 {
		t.Fatalf("outbox after the relay: %d rows (%v), want 0", after, err)
	}
	// A live writer relays its own right after its commit, to the other
	// process's listener.
	other := record(dead)
	waitListening(t, dead)
	c, err := sqlstoretest.Protocol(live).CreateClaim(ctx, mustAgent(t, live, "second").ID, sqlstoretest.NewClaim(t, "relayed at once"))
	if err != nil {
		t.Fatal(err)
	}
	if !other.wait(c.ID, false, 2*time.Second) {
		t.Fatal("the live process's write not delivered to the other process")
	}
}

// TestOutboxRelaysLargeBatches: 1,200 outbox rows, the longest payloads a
// claim id allows among them, are relayed in batches whose combined
// notifications stay under PostgreSQL's 8000-byte limit (pg_notify refuses
// longer ones, and the rows would stay), every one delivered and the outbox
// left empty.
func TestOutboxRelaysLargeBatches(t *testing.T) {
	ctx := context.Background()
	u := sqlstoretest.URL(t, sqlstore.Postgres)
	db, err := sqlstore.Open(ctx, u, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	got := map[dotlab.Change]bool{}
	db.Subscribe(func(ch dotlab.Change) {
		mu.Lock()
		got[ch] = true
		mu.Unlock()
	})
	waitListening(t, db)
	raw, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	want := map[dotlab.Change]bool{}
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1200 {
		ch := dotlab.Change{ClaimID: fmt.Sprintf("DL-%018d", 100000000000000000+i), Room: true, MessageSeq: 9223372036854775807 - int64(i)}
		p := fmt.Sprintf("r:%s:%d", ch.ClaimID, ch.MessageSeq)
		if i%2 == 0 {
			ch = dotlab.Change{ClaimID: fmt.Sprintf("DL-%04d", i)}
			p = "c:" + ch.ClaimID
		}
		want[ch] = true
		if _, err := tx.Exec(`INSERT INTO notify_outbox (payload) VALUES ($1)`, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := 0
		for ch := range want {
			if got[ch] {
				n++
			}
		}
		mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d outbox rows delivered in 5 s", n, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	var left int
	if err := raw.QueryRow(`SELECT count(*) FROM notify_outbox`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("outbox after the relay: %d rows (%v), want 0", left, err)
	}
}
