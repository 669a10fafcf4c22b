package sqlstore

// StopRelay stops this store's outbox relay (PostgreSQL), as if its process
// had died right after committing: its announcements stay in the outbox
// for another process's periodic relay. Tests only.
func (db *DB) StopRelay() {
	db.relay.close()
	db.relay = nil
}

// RelayEvery is the outbox's periodic relay interval.
const RelayEvery = relayEvery
