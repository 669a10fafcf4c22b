// Package store is the protocol's persistence contract: the conditional
// writes the protocol service (package protocol) asks of a store, and the
// reads it decides by. sqlstore implements it on SQLite and PostgreSQL.
//
// A write is one protocol step's effect, decided beforehand by the
// protocol: the rows to write, the lifecycle transition to apply
// conditionally (UPDATE … WHERE state IN the transition's sources), the
// claim-history details and the transparency-log entries. The store applies
// it in one transaction and reports whether it applied (false: the claim
// moved meanwhile, or a deadline passed, so nothing was written); the
// protocol then explains the refusal from fresh state. The store keeps no
// rules of its own beyond those a conditional write needs.
//
// Log entries travel with the write as data (Write.Log): the store appends
// them inside the transaction that applies the write, and nothing the caller
// sees depends on the index they get. So a store may instead record them
// as pending, for a sequencer to integrate in batches later
// (transparency-dev/tessera's shape), without changing this interface.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
)

// Write is what every conditional write carries: when it happens and the
// log entries it appends (in order) when it applies.
type Write struct {
	At  time.Time       // the step's time (stored as Unix milliseconds)
	Log []tlogfmt.Entry // appended in the write's transaction, in order
}

// SignedStatement is the statement a signed record's envelope carries, as
// a write records its use: SHA256 names it (attest.Peeked.StatementSHA256,
// the SHA-256 of the envelope's decoded payload; "" for an unsigned record,
// which records nothing), KeyID the key that signed it (two agents may sign
// one v1 statement, which names no agent), SubjectType and SubjectID the
// record it signs
// (tlogfmt.TypeRun and the run id, TypeChallenge and the challenge id,
// TypeVote and tlogfmt.VoteID). A signed statement signs one record: a
// store refuses a write whose statement and key a record already used with
// ErrStatementUsed, writing nothing (docs/threat-model.md "Replay and
// borrowed keys").
type SignedStatement struct {
	SHA256      string
	KeyID       string
	SubjectType tlogfmt.EntryType
	SubjectID   string
}

// ErrStatementUsed is the refusal of a write whose signed statement
// another record used already (a replayed envelope).
var ErrStatementUsed = dotlab.Errorf(dotlab.EINVALID, "$.envelope: already posted: this signed statement is another record's; a signed statement is used once: sign the record you are posting now")

// RunWrite publishes a run: the claim moves by Transition (publish or
// publish_final) from assigned or running, only while RunnerID holds the
// job and its publish deadline is after At; the run row, the job's end and
// the claim's history are written with it.
type RunWrite struct {
	Write
	ClaimID, RunnerID, RunID string
	Transition               dotlab.Transition
	Outcome                  dotlab.Outcome
	Body                     []byte // the run body exactly as submitted
	Comparisons              []byte // the server's comparisons, JSON
	LogsSHA256               string // "" when the body pins no logs
	// OutputListing is the SHA-256 of the output listing the body pins
	// ("" none): RunnerID's upload on ClaimID with that hash, unpinned
	// until now, is pinned to the run in the same transaction (none such:
	// ECONFLICT, nothing written).
	OutputListing string
	// ChallengeDeadline is set for a compared outcome (the window opens);
	// the zero time settles the claim at once with Outcome.
	ChallengeDeadline time.Time
	History           []string // one detail per state Transition records
	Statement         SignedStatement
}

// ChallengeWrite records a challenge while the claim's challenge window is
// open (state among the Transition's sources, deadline after At), with the
// challenger's role; a Transition that moves (the first disagreeing
// challenge) moves the claim to disputed.
type ChallengeWrite struct {
	Write
	Challenge   *dotlab.Challenge
	Transition  dotlab.Transition
	Body        []byte // the challenge body exactly as submitted
	Comparisons []byte // JSON
	Differences []byte // JSON
	History     []string
	// OutputListing: as RunWrite's, the challenger's upload.
	OutputListing string
	Statement     SignedStatement
}

// VoteWrite records a reviewer's vote while the claim is disputed, then
// counts the votes under the claim's row lock and asks Tally, with the
// run's id and outcome and the first disagreeing challenge's outcome,
// whether they settle the claim (the protocol's rule: dotlab.VoteEvent,
// dotlab.Verdict); a Settlement is applied in the same transaction.
type VoteWrite struct {
	Write
	Vote      dotlab.Vote // the rationale as stored (trimmed)
	Envelope  *dotlab.Envelope
	Statement SignedStatement
	Tally     func(t dotlab.Tally, runID string, run, firstDisagreeing dotlab.Outcome) *Settlement
}

// SealedSeat is one reviewer's seat in a sealed dispute's round
// (docs/mechanism.md §4a) as the store keeps it.
type SealedSeat struct {
	ReviewerID  string
	Round       int
	AssignedAt  time.Time
	Commitment  string    // "" before the reviewer commits
	CommittedAt time.Time // zero before
	// Vote is the vote the server holds (revealed, or posted as a plain
	// vote and sealed by the server), with its Salt and Envelope; nil
	// before.
	Vote      *dotlab.Vote
	Salt      string
	Abstained bool // the seat missed a deadline
}

// SealedRound is a sealed dispute's current round: its number, phase and
// deadlines, the seats of that round, and what a settlement needs (the
// run's id and outcome, the first disagreeing challenge's outcome).
type SealedRound struct {
	ClaimID        string
	Round          int
	Phase          string // dotlab.PhaseCommit or dotlab.PhaseReveal
	CommitDeadline time.Time
	RevealDeadline time.Time // zero in the commit phase
	Seats          []SealedSeat
	RunID          string
	Run, First     dotlab.Outcome
}

// SealedDecision is the protocol's rule applied to a round after a seat
// changed or a deadline passed: the round's next state, the seats that
// abstain, the votes made public (copied into the votes with their log
// entries, Log) and the settlement, if the revealed votes decide.
type SealedDecision struct {
	Round                          int
	Phase                          string
	CommitDeadline, RevealDeadline time.Time // RevealDeadline zero in the commit phase
	Abstain                        []string  // reviewer ids
	Publish                        []SealedSeat
	Log                            []tlogfmt.Entry
	Settlement                     *Settlement
}

// SeatChange is one reviewer's change to its seat in the current round:
// a commitment (Commit set; in the commit phase, on an uncommitted seat),
// optionally with the vote the server seals (Vote set too), or a reveal
// (Vote set alone; in the reveal phase, on a committed seat not yet
// revealed).
type SeatChange struct {
	ReviewerID string
	Commit     string
	Vote       *dotlab.Vote
	Salt       string
	Envelope   *dotlab.Envelope
}

// SealedWrite applies Seat (nil: none, a sweep of the settlement clock)
// to ClaimID's current round under the claim's row lock while the claim
// is disputed, appends Log, then reads the round and applies what Decide
// returns (nil: nothing more), all in one transaction. applied is false,
// and nothing is written, when the claim left disputed or the seat's
// condition no longer holds.
type SealedWrite struct {
	Write
	ClaimID string
	Seat    *SeatChange
	Decide  func(SealedRound) *SealedDecision
}

// Settlement settles a claim by Transition with Outcome, recording
// History and appending Log.
type Settlement struct {
	Transition dotlab.Transition
	Outcome    dotlab.Outcome
	History    []string
	Log        []tlogfmt.Entry
}

// Candidate is a claim the draw may offer: its id, draw key and the
// capabilities its rerun requires.
type Candidate struct {
	ClaimID  string
	Key      int64
	Requires []string
}

// OfferWrite offers ClaimID to AgentID until Expires, by Transition
// (offer), only while the claim is free and the agent holds no open offer.
type OfferWrite struct {
	Write
	ClaimID, AgentID string
	Transition       dotlab.Transition
	Expires          time.Time
	// Wait makes the offer wait for a claim row another transaction holds
	// (PostgreSQL) instead of answering ErrClaimBusy at once.
	Wait bool
}

// ErrOpenOffer is AddOffer's refusal when the agent holds an open offer
// already (a concurrent draw of its own won one).
var ErrOpenOffer = errors.New("the agent already holds an open offer")

// ErrClaimBusy is AddOffer's answer, without OfferWrite.Wait, when the
// claim is free but another transaction holds its row (PostgreSQL; a
// concurrent offer of it, most often, or a write to the claim's room): the
// draw tries its other candidates first and comes back to it with Wait.
// Nothing was written.
var ErrClaimBusy = errors.New("the claim's row is held by another transaction")

// AcceptWrite accepts an offer: the claim moves by Transition (accept)
// only while AgentID holds its open offer (the offer's expiry after At);
// the job, the runner role and the history are written with it.
type AcceptWrite struct {
	Write
	ClaimID, AgentID string
	Transition       dotlab.Transition
	PublishDeadline  time.Time
	History          []string
}

// DeclineWrite declines an offer: the claim goes back to the pool (a new
// draw key) only while AgentID holds its open offer; the job ends with
// Reason.
type DeclineWrite struct {
	Write
	ClaimID, AgentID string
	Transition       dotlab.Transition
	Reason           string
}

// LogsWrite attaches a run's logs once: only while run RunID pins SHA256
// as its logs_sha256 and has no logs attached. Coverage is the protocol's
// judgement of them (dotlab.LogCoverage, JSON); Complete its verdict.
type LogsWrite struct {
	Write
	ClaimID, AgentID, RunID, SHA256 string
	Logs                            []byte
	Coverage                        []byte
	Complete                        bool
}

// OutputListingWrite stores AgentID's output listing for its record on
// ClaimID (docs/protocol.md §6 "Output listing"): inserted, or replacing
// its earlier upload while no record pins that; applied is false when a
// record pins the one stored already.
type OutputListingWrite struct {
	Write
	ClaimID, AgentID string
	Pin              dotlab.OutputListing
	Listing          []byte // canonical (dotlab.ParseOutputListing)
}

// StoredOutputListing is an uploaded output listing: its pin, its bytes
// and the run or challenge that pinned it ("" not yet).
type StoredOutputListing struct {
	Pin      dotlab.OutputListing
	Listing  []byte
	RecordID string
}

// MemberWrite adds an agent to a claim's lab room in Role (runner,
// collaborator, submitter). TakeRole also gives it that role on the claim
// (a collaborator's); a Transition that moves (join_runner from assigned)
// moves the claim while AgentID is its runner, recording History.
type MemberWrite struct {
	Write
	ClaimID, AgentID, Role string
	TakeRole               bool
	Transition             dotlab.Transition
	History                []string
}

// MessageWrite posts a lab message; the store gives it the room's next
// seq, then appends Entries(message) (the entry names the seq). With
// JoinAsSubmitter the claim's submitter becomes a member by posting.
type MessageWrite struct {
	Write
	Message         *dotlab.LabMessage
	JoinAsSubmitter bool
	Entries         func(m *dotlab.LabMessage) []tlogfmt.Entry
}

// ClaimWrite lists a claim: the store numbers it (DL-0001, …), stores the
// manifest as submitted, gives the submitter its role and takes the
// Transition (list), then appends Entries(id).
type ClaimWrite struct {
	Write
	Claim       dotlab.NewClaim // the field trimmed
	SubmitterID string
	Transition  dotlab.Transition
	History     []string
	Entries     func(id string) []tlogfmt.Entry
}

// Due is one change the settlement clock finds due: the claim, its runner
// (if any), the deadline that made it due, and for a closing window the
// run whose outcome settles the claim.
type Due struct {
	ClaimID, AgentID string
	At               time.Time
	RunID            string
	Outcome          dotlab.Outcome
}

// DueWrite applies one due change by Transition (expire, abandon,
// window_close), only while it is still due: Outcome is the settled
// outcome of a closing window.
type DueWrite struct {
	Write
	Due        Due
	Transition dotlab.Transition
	Outcome    dotlab.Outcome
	History    []string
}

// AgentWrite registers an agent: the record as the protocol built it
// (trimmed name and operator, the parsed public key and its key id) and
// the API key, which the store keeps only as its hash.
type AgentWrite struct {
	Agent  *dotlab.Agent
	APIKey string
}

// Writer applies the protocol's conditional writes. Each returns applied
// false, and writes nothing, when its condition no longer holds; errors are
// the store's own (a unique violation of one role per agent per claim is
// dotlab.ECONFLICT).
type Writer interface {
	AddAgent(ctx context.Context, w AgentWrite) error                             // ECONFLICT: the public key is another agent's; EDUPLICATE: a store keeping names unique holds one that reads the same
	AddClaim(ctx context.Context, w ClaimWrite) (id string, err error)            // EDUPLICATE: the manifest was listed meanwhile
	AddReviewer(ctx context.Context, claimID, agentID string, at time.Time) error // ECONFLICT: another role meanwhile
	AddOffer(ctx context.Context, w OfferWrite) (won bool, err error)             // ErrOpenOffer, ErrClaimBusy
	AddAccept(ctx context.Context, w AcceptWrite) (applied bool, err error)       // ECONFLICT: another role on the claim
	AddDecline(ctx context.Context, w DeclineWrite) (applied bool, err error)     //
	AddLogs(ctx context.Context, w LogsWrite) (applied bool, err error)           //
	AddOutputListing(ctx context.Context, w OutputListingWrite) (applied bool, err error)
	AddMember(ctx context.Context, w MemberWrite) error // ECONFLICT: another role meanwhile
	AddMessage(ctx context.Context, w MessageWrite) error
	ApplyDue(ctx context.Context, w DueWrite) (applied bool, err error)
	AddRun(ctx context.Context, w RunWrite) (applied bool, err error)             // ErrStatementUsed
	AddChallenge(ctx context.Context, w ChallengeWrite) (applied bool, err error) // ErrStatementUsed
	AddVote(ctx context.Context, w VoteWrite) (applied bool, err error)           // ErrStatementUsed
	// AddSealedReviewer gives agentID the reviewer role on claimID and a
	// seat in its current sealed round (made, with commitDeadline, if
	// none), only while that round is in its commit phase with fewer than
	// seats live seats: ECONFLICT for another role meanwhile,
	// ErrCommitteeFull when the seat is gone.
	AddSealedReviewer(ctx context.Context, claimID, agentID string, seats int, at, commitDeadline time.Time) error
	ApplySealed(ctx context.Context, w SealedWrite) (applied bool, err error)
	// AddCanaryReports keeps agentID's canary reports on claimID's pinned
	// URLs at at, each replacing that agent's earlier report on its URL.
	AddCanaryReports(ctx context.Context, claimID, agentID string, at time.Time, reports []dotlab.CanaryReport) error
}

// ErrCommitteeFull is AddSealedReviewer's refusal when the round's
// committee filled (or its commit phase ended) meanwhile.
var ErrCommitteeFull = errors.New("the sealed round's committee is full")

// Reader is what the protocol reads to decide a step, beyond the domain's
// read services.
type Reader interface {
	// Now is the store's clock: deadlines are stored and compared by it.
	Now() time.Time
	// Windows are the protocol's windows and review quorum the store runs
	// with.
	Windows() dotlab.Windows
	// RoleOf is agentID's role on claimID ("" for none).
	RoleOf(ctx context.Context, claimID, agentID string) (string, error)
	// UploadedOutputListing is agentID's output listing on claimID, with
	// its bytes when withListing (found false: none uploaded).
	UploadedOutputListing(ctx context.Context, claimID, agentID string, withListing bool) (l StoredOutputListing, found bool, err error)
	// UnpinnedOutputListings counts agentID's output listings no record
	// pins yet.
	UnpinnedOutputListings(ctx context.Context, agentID string) (int, error)
	// RunClaim is the claim of run runID, or the ENOTFOUND error of an
	// unknown run.
	RunClaim(ctx context.Context, runID string) (string, error)
	// DrawCandidates lists up to limit free funded claims with draw keys
	// in [lo, hi) that agentID holds no role on and was never offered, in
	// key order.
	DrawCandidates(ctx context.Context, agentID string, lo, hi int64, limit int) ([]Candidate, error)
	// AssignedDispute is the disputed claim agentID is assigned to and has
	// not voted on (found false: none).
	AssignedDispute(ctx context.Context, agentID string) (claimID string, found bool, err error)
	// DisputeCandidates lists up to limit disputed claims agentID holds no
	// role on.
	DisputeCandidates(ctx context.Context, agentID string, limit int) ([]string, error)
	// OpenOffer is agentID's open offer at now (found false: none).
	OpenOffer(ctx context.Context, agentID string, now time.Time) (j *dotlab.Job, found bool, err error)
	// LatestJob is agentID's latest job on claimID; found is false when it
	// was never offered one.
	LatestJob(ctx context.Context, claimID, agentID string) (j *dotlab.Job, found bool, err error)
	// Agent is a registered agent, or the ENOTFOUND error of an unknown id.
	Agent(ctx context.Context, id string) (*dotlab.Agent, error)
	// LabMember is agentID's membership of claimID's room (found false:
	// not a member).
	LabMember(ctx context.Context, claimID, agentID string) (m dotlab.LabMember, found bool, err error)
	// ClaimByManifest is the claim listed with the manifest of canonical
	// hash hash (found false: none).
	ClaimByManifest(ctx context.Context, hash string) (id string, found bool, err error)
	// Due lists up to limit changes of event ev (expire, abandon,
	// window_close) due at now, the earliest first.
	Due(ctx context.Context, ev dotlab.Event, now time.Time, limit int) ([]Due, error)
	// HasVoted reports whether reviewerID voted on claimID.
	HasVoted(ctx context.Context, claimID, reviewerID string) (bool, error)
	// StatementUse is the record that used the statement of digest sha256
	// (SignedStatement.SHA256) signed with key keyID, as "<subject type>
	// <subject id>" ("run run_…"); found is false when none did.
	StatementUse(ctx context.Context, sha256, keyID string) (subject string, found bool, err error)
	// LatestCanaryReports is the latest canary report on each pinned URL
	// of claimID any agent reported on, by URL.
	LatestCanaryReports(ctx context.Context, claimID string) ([]dotlab.CanaryReport, error)
	// LastCanaryReport is when agentID last reported on claimID (found
	// false: never).
	LastCanaryReport(ctx context.Context, claimID, agentID string) (at time.Time, found bool, err error)
	// SealedRound is claimID's current sealed round (found false: none).
	SealedRound(ctx context.Context, claimID string) (r SealedRound, found bool, err error)
	// AssignedSealed is the disputed claim whose current round holds a
	// live seat of agentID that still has to act (commit in the commit
	// phase, reveal a commitment in the reveal phase); found false: none.
	AssignedSealed(ctx context.Context, agentID string) (claimID string, found bool, err error)
	// SealedCandidates lists up to limit disputed claims agentID holds no
	// role on whose current round (if any) is in its commit phase with
	// fewer than seats live seats.
	SealedCandidates(ctx context.Context, agentID string, seats, limit int) ([]string, error)
	// SealedDue lists up to limit disputed claims whose current round's
	// deadline (commit or reveal, by phase) is at or before now.
	SealedDue(ctx context.Context, now time.Time, limit int) ([]string, error)
}
