package sqlstore

import "github.com/pressly/goose/v3"

// StopRelay stops this store's outbox relay (PostgreSQL), as if its process
// had died right after committing: its announcements stay in the outbox
// for another process's periodic relay. Tests only.
func (db *DB) StopRelay() {
	db.relay.close()
	db.relay = nil
}

// RelayEvery is the outbox's periodic relay interval.
const RelayEvery = relayEvery

// OutboxMigration is migration 00013 (a Go migration) for a test's own
// goose provider over the migrations directory.
func OutboxMigration(d Dialect) *goose.Migration { return outboxMigration(d) }
