package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pressly/goose/v3"
)

// The outbox (PostgreSQL; docs/protocol.md §9 "Delivery"). A write
// transaction does not pg_notify: PostgreSQL holds one database-wide lock
// from a notifying transaction's pre-commit until its commit is flushed, so
// notifying writes commit one at a time. Instead the transaction INSERTs its
// announcements into notify_outbox (its id a sequence: no row shared
// between writers), and after the commit the committing process relays: a
// short transaction takes up to relayBatch rows FOR UPDATE SKIP LOCKED in
// id order, pg_notify's them as combined payloads and deletes them, in one
// statement, so the notify lock is held once per batch instead of once per
// write. One relay runs at a time per process (a poke while it runs makes
// it run once more), and every relayEvery each process relays whatever is
// left, so rows a process left behind (killed between its commit and its
// relay) are announced by another within relayEvery plus one relay.

const (
	relayEvery = 200 * time.Millisecond
	relayBatch = 512
	// relayTimeout bounds one relay statement (a stuck connection is then
	// dropped and the rows are taken by the next relay).
	relayTimeout = 10 * time.Second
	// maxPayload bounds one combined notification (PostgreSQL refuses
	// payloads of 8000 bytes and more).
	maxPayload = 7900
)

// outboxMigration is sqlstore migration 00013 (a Go migration: the table's
// id is an identity column, which SQLite spells otherwise; SQLite announces
// in process only and gets no table).
func outboxMigration(dialect Dialect) *goose.Migration {
	up, down := func(context.Context, *sql.Tx) error { return nil }, func(context.Context, *sql.Tx) error { return nil }
	if dialect == Postgres {
		up = execMigration(`CREATE TABLE notify_outbox (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload TEXT NOT NULL
)`)
		down = execMigration(`DROP TABLE notify_outbox`)
	}
	return goose.NewGoMigration(13, &goose.GoFunc{RunTx: up}, &goose.GoFunc{RunTx: down})
}

func execMigration(stmt string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migration 13: %w", err)
		}
		return nil
	}
}

// outbox relays notify_outbox to pg_notify.
type outbox struct {
	db      *sql.DB
	channel string
	poke    chan struct{} // capacity 1: a relay asked for
	stop    context.CancelFunc
	done    chan struct{}
	conn    *sql.Conn // the relay's own connection (run's goroutine only)
}

// startOutbox starts the process's relay (PostgreSQL; nil on SQLite).
func startOutbox(db *sql.DB, channel string) *outbox {
	ctx, stop := context.WithCancel(context.Background())
	o := &outbox{db: db, channel: channel, poke: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go o.run(ctx)
	o.kick() // rows a crash left behind
	return o
}

// kick asks for a relay; if one is running it runs once more after.
func (o *outbox) kick() {
	if o == nil {
		return
	}
	select {
	case o.poke <- struct{}{}:
	default:
	}
}

func (o *outbox) run(ctx context.Context) {
	defer close(o.done)
	tick := time.NewTicker(relayEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.poke:
		case <-tick.C:
		}
		// A full batch may leave more; an error is retried at the next
		// poke or tick (the rows stay in the outbox).
		for {
			rctx, cancel := context.WithTimeout(ctx, relayTimeout)
			n, err := o.relay(rctx)
			cancel()
			if err != nil || n < relayBatch {
				break
			}
		}
	}
}

// relaySQL announces and deletes up to $2 outbox rows in one statement (its
// own transaction: one round trip): the rows are taken FOR UPDATE SKIP
// LOCKED in id order, so concurrent relays of other processes take others,
// and sent as newline-joined payloads of $3 rows each on channel $1. It
// returns how many rows it took.
const relaySQL = `WITH taken AS (
    DELETE FROM notify_outbox WHERE id IN
        (SELECT id FROM notify_outbox ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING id, payload),
chunks AS (
    SELECT (row_number() OVER (ORDER BY id) - 1) / $3 AS chunk, id, payload FROM taken)
SELECT coalesce(sum(n), 0)::bigint FROM (
    SELECT count(*) AS n, pg_notify($1, string_agg(payload, E'\n' ORDER BY id))::text AS sent
    FROM chunks GROUP BY chunk) AS notified
WHERE sent IS NOT NULL`

// relayChunk is how many payloads one notification carries: a payload is
// at most 43 bytes ("r:" + a claim id of at most 21 + ":" + an int64), so
// 160 of them with their newlines stay under maxPayload.
const relayChunk = 160

// relay announces and deletes up to relayBatch outbox rows, returning how
// many it took. It runs on a connection of its own (taken from the pool
// once, again after an error), so a relay never queues behind the writes
// for a pool connection.
func (o *outbox) relay(ctx context.Context) (int, error) {
	if o.conn == nil {
		c, err := o.db.Conn(ctx)
		if err != nil {
			return 0, err
		}
		o.conn = c
	}
	var n int64
	if err := o.conn.QueryRowContext(ctx, relaySQL, o.channel, relayBatch, relayChunk).Scan(&n); err != nil {
		o.conn.Close()
		o.conn = nil
		return 0, err
	}
	return int(n), nil
}

// close stops the relay and waits for it.
func (o *outbox) close() {
	if o == nil {
		return
	}
	o.stop()
	<-o.done
	if o.conn != nil {
		o.conn.Close()
	}
}
