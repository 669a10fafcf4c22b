package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Announcing changes (docs/protocol.md §9 "Delivery"). Every write
// transaction that changes a claim's records announces the claim
// (db.announce, from inside the transaction; addEvent does it for every
// state change). The announcements of a transaction go out only if it
// commits:
//
//   - to this process's subscribers (Subscribe) right after the commit, on
//     both engines, so that this process never serves its own write stale;
//   - on PostgreSQL also through the outbox: the transaction INSERTs them
//     into notify_outbox, and after the commit a relay (outbox.go) sends
//     them with pg_notify, a batch at a time, to every session listening
//     on the store's channel: one dedicated connection per process (listener),
//     which reconnects when it fails and then announces a resync (the zero
//     dotlab.Change), since notifications sent while it was away are lost.
//
// The store stays the source of truth: an announcement names a claim, and
// subscribers read what changed back from the store.

// Listener timing: how long the listening connection may stay silent before
// it is pinged, how long a ping may take, and the reconnect backoff.
const (
	listenIdle     = 10 * time.Second
	listenPing     = 5 * time.Second
	reconnectFirst = 50 * time.Millisecond
	reconnectMax   = 5 * time.Second
)

// announcer holds the subscribers and each open transaction's announcements.
type announcer struct {
	dsn     string // PostgreSQL: the listener's connection string
	channel string // PostgreSQL: the notification channel of this store (its schema)

	mu      sync.Mutex
	subs    []subscriber // in the order they subscribed
	nextSub uint64
	pending map[*sql.Tx][]dotlab.Change

	listening atomic.Bool
	lastErr   atomic.Pointer[error] // why the listener last failed (nil: never)
	startOnce sync.Once
	stop      context.CancelFunc
	done      chan struct{}
}

type subscriber struct {
	id uint64
	fn func(dotlab.Change)
}

func newAnnouncer() *announcer {
	return &announcer{pending: map[*sql.Tx][]dotlab.Change{}}
}

// Subscribe calls fn with every change committed from now on: this
// process's own right after each commit, and on PostgreSQL every process's
// (this one's included, a second time) as its notification arrives. fn also
// receives the zero Change (a resync: re-read everything) whenever the
// PostgreSQL listener loses its connection and again once it listens anew.
// fn is called from the committing goroutine or the listener's, possibly
// concurrently, and must not block; for each change the subscribers are
// called one after the other, in the order they subscribed. The returned
// function unsubscribes.
// On PostgreSQL the first Subscribe starts the listener (Listening reports
// when it is up); Close stops it.
func (db *DB) Subscribe(fn func(dotlab.Change)) (cancel func()) {
	a := db.notes
	a.mu.Lock()
	id := a.nextSub
	a.nextSub++
	a.subs = append(slices.Clip(a.subs), subscriber{id, fn}) // copy on write: deliver reads a.subs unlocked
	a.mu.Unlock()
	if db.dialect == Postgres {
		a.startOnce.Do(func() {
			ctx, stop := context.WithCancel(context.Background())
			a.stop, a.done = stop, make(chan struct{})
			go a.listen(ctx)
		})
	}
	return func() {
		a.mu.Lock()
		a.subs = slices.DeleteFunc(slices.Clone(a.subs), func(s subscriber) bool { return s.id == id })
		a.mu.Unlock()
	}
}

// Listening reports whether every committed change is being delivered to
// the subscribers: always on SQLite (one process, announced in process);
// on PostgreSQL while the listener holds its LISTEN (false before the first
// Subscribe, and from a lost connection until it is back).
func (db *DB) Listening() bool {
	if db.dialect != Postgres {
		return true
	}
	return db.notes.listening.Load()
}

// ListenerError returns why the PostgreSQL listener last lost or failed to
// open its connection (nil when it never failed, and on SQLite), for logs
// and readiness checks; Listening tells whether it is up now.
func (db *DB) ListenerError() error {
	if p := db.notes.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// announce records that the transaction tx changes ch.ClaimID; the change
// is announced if and when tx commits (db.tx). A claim announced both as a
// room change and as a claim change is announced as a claim change.
func (db *DB) announce(tx *sql.Tx, ch dotlab.Change) {
	a := db.notes
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.pending[tx]
	for i, p := range list {
		if p.ClaimID == ch.ClaimID {
			list[i].Room = p.Room && ch.Room
			list[i].MessageSeq = max(p.MessageSeq, ch.MessageSeq)
			return
		}
	}
	a.pending[tx] = append(list, ch)
}

// announceClaim records that tx changes the records of claimID.
func (db *DB) announceClaim(tx *sql.Tx, claimID string) {
	db.announce(tx, dotlab.Change{ClaimID: claimID})
}

// takePending removes and returns tx's announcements.
func (a *announcer) takePending(tx *sql.Tx) []dotlab.Change {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.pending[tx]
	delete(a.pending, tx)
	return list
}

// notifyInTx writes tx's announcements into the outbox inside tx
// (PostgreSQL; outbox.go): they are relayed to pg_notify after the commit,
// and a rolled-back transaction leaves none. SQLite has nothing to send.
func (db *DB) notifyInTx(ctx context.Context, tx *sql.Tx, list []dotlab.Change) error {
	if db.dialect != Postgres || len(list) == 0 {
		return nil
	}
	if db.inTxNotify {
		for _, ch := range list {
			if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, db.notes.channel, payload(ch)); err != nil {
				return err
			}
		}
		return nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO notify_outbox (payload) VALUES `)
	args := make([]any, len(list))
	for i, ch := range list {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("($" + strconv.Itoa(i+1) + ")")
		args[i] = payload(ch)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// deliver calls every subscriber with each change, in order.
func (a *announcer) deliver(list ...dotlab.Change) {
	if len(list) == 0 {
		return
	}
	a.mu.Lock()
	subs := a.subs
	a.mu.Unlock()
	for _, ch := range list {
		for _, s := range subs {
			s.fn(ch)
		}
	}
}

// payload encodes a change as its notification text: "c:DL-0001" (the
// claim's records) or "r:DL-0001:57" (its room only, up to message 57).
func payload(ch dotlab.Change) string {
	if ch.Room {
		return "r:" + ch.ClaimID + ":" + strconv.FormatInt(ch.MessageSeq, 10)
	}
	return "c:" + ch.ClaimID
}

// parsePayload decodes a notification text; anything else is a resync.
func parsePayload(s string) dotlab.Change {
	kind, rest, _ := strings.Cut(s, ":")
	switch kind {
	case "c":
		if dotlab.ValidClaimID(rest) {
			return dotlab.Change{ClaimID: rest}
		}
	case "r":
		id, n, _ := strings.Cut(rest, ":")
		seq, err := strconv.ParseInt(n, 10, 64)
		if dotlab.ValidClaimID(id) && err == nil && seq >= 0 {
			return dotlab.Change{ClaimID: id, Room: true, MessageSeq: seq}
		}
	}
	return dotlab.Change{}
}

// parsePayloads decodes a notification of newline-separated payloads (the
// outbox's relay combines a batch's; outbox.go).
func parsePayloads(s string) []dotlab.Change {
	parts := strings.Split(s, "\n")
	list := make([]dotlab.Change, len(parts))
	for i, p := range parts {
		list[i] = parsePayload(p)
	}
	return list
}

// channelFor is the notification channel of the store in schema: channels
// are per database, so stores in different schemas of one database (the
// tests' fresh schemas) get their own. PostgreSQL channel names are at
// most 63 bytes.
func channelFor(schema string) string {
	ch := "dotlab." + schema
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}

// listen holds the listening connection until ctx ends: connect, LISTEN,
// announce a resync (whatever was sent before is recovered by re-reading),
// relay notifications; on any failure announce a resync, back off and
// connect again.
func (a *announcer) listen(ctx context.Context) {
	defer close(a.done)
	wait := reconnectFirst
	for ctx.Err() == nil {
		conn, err := a.connect(ctx)
		if err == nil {
			a.listening.Store(true)
			a.deliver(dotlab.Change{})
			wait = reconnectFirst
			err = a.relay(ctx, conn)
			conn.Close(context.Background())
			a.listening.Store(false)
			a.deliver(dotlab.Change{})
		}
		if ctx.Err() != nil {
			return
		}
		a.lastErr.Store(&err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, reconnectMax)
	}
}

// connect opens the listening connection, named "dotlab listen CHANNEL" in
// pg_stat_activity, and LISTENs on the channel.
func (a *announcer) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(a.dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = listenerName(a.channel)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{a.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// ListenerName is the application_name of the store's listening connection
// on PostgreSQL, as pg_stat_activity shows it ("dotlab listen dotlab.SCHEMA",
// at most 63 bytes); "" on SQLite.
func (db *DB) ListenerName() string {
	if db.dialect != Postgres {
		return ""
	}
	return listenerName(db.notes.channel)
}

func listenerName(channel string) string {
	n := "dotlab listen " + channel
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// relay delivers notifications until the connection fails (or ctx ends); a
// connection silent for listenIdle is pinged, so that a dead one is noticed.
func (a *announcer) relay(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			a.deliver(parsePayloads(n.Payload)...)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !pgconn.Timeout(err):
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, listenPing)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
}

// close stops the listener and waits for it.
func (a *announcer) close() {
	a.startOnce.Do(func() {}) // waits for a start in progress; none starts after Close
	if a.stop != nil {
		a.stop()
		<-a.done
	}
}
