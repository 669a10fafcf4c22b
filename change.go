package dotlab

// Change names one committed write, as the store announces it to every
// server process sharing it (docs/protocol.md §9 "Delivery"): live room
// streams fetch what is new, and read caches drop what it made stale. A
// change says only which claim; what changed is read back from the store,
// which stays the source of truth.
//
// The zero Change (ClaimID "") is a resync: announcements may have been
// missed (a listener lost its connection, or has just regained it), so
// everything must be re-read.
type Change struct {
	// ClaimID is the claim whose records changed: its row, its history, its
	// run, its challenges or votes, or (Room) its lab room.
	ClaimID string
	// Room is true when only the room changed (a message was posted): the
	// claim, its run and its challenges are as they were.
	Room bool
	// MessageSeq is, for a room change, the seq of the newest message it
	// posted (0 when not known): a process that has read up to it already
	// (its own post, announced to it twice) need not read again.
	MessageSeq int64
}

// Resync reports whether c is the zero Change: re-read everything.
func (c Change) Resync() bool { return c.ClaimID == "" }
