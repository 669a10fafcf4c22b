package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
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
// id order, pg_notify's them as combined payloads, deletes them and
// commits, so the notify lock is held once per batch instead of once per
// write. One relay runs at a time per process (a poke while it runs makes
// it run once more), and every relayEvery each process relays whatever is
// left, so rows a process left behind (killed between its commit and its
// relay) are announced by another within relayEvery plus one relay.

const (
	relayEvery = 200 * time.Millisecond
	relayBatch = 512
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
			n, err := o.relay(ctx)
			if err != nil || n < relayBatch {
				break
			}
		}
	}
}

// relay announces and deletes up to relayBatch outbox rows in one
// transaction, returning how many it took.
func (o *outbox) relay(ctx context.Context) (int, error) {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `DELETE FROM notify_outbox WHERE id IN
    (SELECT id FROM notify_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, payload`, relayBatch)
	if err != nil {
		return 0, err
	}
	type row struct {
		id      int64
		payload string
	}
	var taken []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.payload); err != nil {
			rows.Close()
			return 0, err
		}
		taken = append(taken, r)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(taken) == 0 {
		return 0, nil
	}
	slices.SortFunc(taken, func(a, b row) int { return int(a.id - b.id) })
	payloads := make([]string, len(taken))
	for i, r := range taken {
		payloads[i] = r.payload
	}
	for _, p := range combine(payloads) {
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, o.channel, p); err != nil {
			return 0, err
		}
	}
	return len(taken), tx.Commit()
}

// combine joins payloads, duplicates dropped and order kept, into
// newline-separated notifications of at most maxPayload bytes each.
func combine(payloads []string) []string {
	seen := make(map[string]bool, len(payloads))
	var out []string
	var b strings.Builder
	for _, p := range payloads {
		if len(p) > maxPayload {
			p = "resync" // never written by this store; re-read everything
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		if b.Len() > 0 && b.Len()+1+len(p) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// close stops the relay and waits for it.
func (o *outbox) close() {
	if o == nil {
		return
	}
	o.stop()
	<-o.done
}
