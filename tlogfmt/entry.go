// Package tlogfmt holds the public formats of DotLab's transparency log
// (docs/verification.md): the log entries — typed, versioned records as RFC
// 8785 canonical JSON —, the c2sp.org/tlog-checkpoint note text and the
// c2sp.org/tlog-tiles paths and entry bundles. The server (translog) writes
// them and `dotlab verify` (package verify) reads them; the package imports
// the root package, the standard library and gowebpki/jcs only, so an agent
// binary links no server code.
package tlogfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/dotlab/dotlab"

	"github.com/gowebpki/jcs"
)

// EntryType names what a log entry records (docs/verification.md "Entries").
type EntryType string

// The entry types. Each is logged in the same transaction as its record.
const (
	TypeClaim      EntryType = "claim"      // a claim listed, with its manifest identity (ClaimRecord)
	TypeOffer      EntryType = "offer"      // an offer taken: a runner accepted the job (OfferRecord)
	TypeRun        EntryType = "run"        // an official run published (RunRecord)
	TypeChallenge  EntryType = "challenge"  // a challenge posted (ChallengeRecord)
	TypeVote       EntryType = "vote"       // a reviewer's vote (VoteRecord)
	TypeSettlement EntryType = "settlement" // a claim settled with its final outcome (SettlementRecord)
	TypeMessage    EntryType = "message"    // the digest of a lab message (MessageRecord)
	// TypeCommitment is a sealed vote's commitment (CommitmentRecord),
	// logged when the reviewer commits; its vote is logged as TypeVote when
	// the dispute is decided (docs/mechanism.md §4a).
	TypeCommitment EntryType = "vote_commitment"
	// TypeEnvelope is a signed record's DSSE envelope, logged in the same
	// transaction as the run, challenge or vote it signs (EnvelopeRecord).
	TypeEnvelope EntryType = "envelope"
)

// EntryTypes lists the entry types in the order of docs/verification.md.
var EntryTypes = []EntryType{TypeClaim, TypeOffer, TypeRun, TypeChallenge, TypeVote, TypeSettlement, TypeMessage, TypeEnvelope, TypeCommitment}

// Valid reports whether t is one of EntryTypes.
func (t EntryType) Valid() bool {
	for _, v := range EntryTypes {
		if t == v {
			return true
		}
	}
	return false
}

// Version is the version of every entry type this package writes. A reader
// refuses an entry whose version it does not know.
const Version = 1

// MaxEntryBytes is the largest entry: c2sp.org/tlog-tiles entry bundles
// prefix each entry with a big-endian uint16 length.
const MaxEntryBytes = 1<<16 - 1

// Entry is one log entry before encoding: its type and version, the claim
// it belongs to, the record's id (unique within its type) and the typed
// record (one of the *Record types of this package).
type Entry struct {
	Type    EntryType `json:"type"`
	V       int       `json:"v"`
	ClaimID string    `json:"claim_id"`
	ID      string    `json:"id"`
	Record  any       `json:"record"`
}

// Encode returns the entry's bytes as logged: the RFC 8785 canonical JSON
// of {"claim_id","id","record","type","v"}. It fails when the type is
// unknown, an id is empty or the encoding exceeds MaxEntryBytes.
func (e Entry) Encode() ([]byte, error) {
	if !e.Type.Valid() {
		return nil, fmt.Errorf("log entry: unknown type %q", e.Type)
	}
	if e.ClaimID == "" || e.ID == "" {
		return nil, fmt.Errorf("log entry %s: claim_id and id are required", e.Type)
	}
	if e.V == 0 {
		e.V = Version
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("log entry %s %s: %w", e.Type, e.ID, err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("log entry %s %s: canonical JSON: %w", e.Type, e.ID, err)
	}
	if len(out) > MaxEntryBytes {
		// A record too large to log is refused whole (413 too_large), not
		// a 500: nothing of it is written.
		return nil, dotlab.Errorf(dotlab.ETOOLARGE, "$: the %s's log entry would be %d bytes; one entry holds at most %d (c2sp.org/tlog-tiles): list fewer files in output_hashes and input_hashes (about 500 paths of 60 bytes fit)",
			e.Type, len(out), MaxEntryBytes)
	}
	return out, nil
}

// Logged is a decoded log entry: the envelope fields and the record as the
// canonical JSON it was logged as.
type Logged struct {
	Type    EntryType       `json:"type"`
	V       int             `json:"v"`
	ClaimID string          `json:"claim_id"`
	ID      string          `json:"id"`
	Record  json.RawMessage `json:"record"`
}

// Decode parses a logged entry. It fails when data is not canonical JSON
// (re-encoding gives other bytes), the type or version is unknown, or an id
// is missing.
func Decode(data []byte) (*Logged, error) {
	var l Logged
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("log entry: %w", err)
	}
	canon, err := jcs.Transform(data)
	if err != nil || !bytes.Equal(canon, data) {
		return nil, fmt.Errorf("log entry %s %s is not RFC 8785 canonical JSON", l.Type, l.ID)
	}
	if !l.Type.Valid() {
		return nil, fmt.Errorf("log entry: unknown type %q", l.Type)
	}
	if l.V != Version {
		return nil, fmt.Errorf("log entry %s %s: version %d; this reader knows version %d", l.Type, l.ID, l.V, Version)
	}
	if l.ClaimID == "" || l.ID == "" {
		return nil, fmt.Errorf("log entry %s: claim_id and id are required", l.Type)
	}
	return &l, nil
}

// Key is how a record is found in the log: its entry type and id.
type Key struct {
	Type EntryType
	ID   string
}

// String is "run r_abc".
func (k Key) String() string { return string(k.Type) + " " + k.ID }

// Key returns l's lookup key.
func (l *Logged) Key() Key { return Key{l.Type, l.ID} }

// Key returns e's lookup key.
func (e Entry) Key() Key { return Key{e.Type, e.ID} }
