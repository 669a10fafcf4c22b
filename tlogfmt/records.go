package tlogfmt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/gowebpki/jcs"
)

// TimeFormat is how entries write times: UTC, millisecond precision (the
// store's), e.g. "2026-01-02T15:04:05.123Z".
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time formats t as TimeFormat, truncated to the millisecond.
func Time(t time.Time) string { return t.UTC().Truncate(time.Millisecond).Format(TimeFormat) }

func optTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return Time(*t)
}

// TextSHA256 is the lowercase hex SHA-256 of s's UTF-8 bytes: how entries
// record free text (notes, rationales, message bodies), so that an entry
// stays small and the text can still be checked against it.
func TextSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ClaimRecord is a claim as listed (TypeClaim; id: the claim id).
type ClaimRecord struct {
	Title        string `json:"title"`
	Field        string `json:"field"`
	SubmitterID  string `json:"submitter_id"`
	ManifestHash string `json:"manifest_hash"` // the manifest's RFC 8785 identity, hex SHA-256
	CreatedAt    string `json:"created_at"`
}

// ClaimEntry is the entry of a claim's listing.
func ClaimEntry(c *dotlab.Claim) Entry {
	return Entry{Type: TypeClaim, ClaimID: c.ID, ID: c.ID, Record: ClaimRecord{
		Title: c.Title, Field: c.Field, SubmitterID: c.SubmitterID, ManifestHash: c.ManifestHash, CreatedAt: Time(c.CreatedAt)}}
}

// OfferRecord is an offer taken: the runner drawn accepted the job
// (TypeOffer; id: OfferID).
type OfferRecord struct {
	RunnerID        string `json:"runner_id"`
	AcceptedAt      string `json:"accepted_at"`
	PublishDeadline string `json:"publish_deadline"`
}

// OfferID is an offer's id in the log: "DL-0001:ag_…" (a runner takes a
// claim's job at most once).
func OfferID(claimID, runnerID string) string { return claimID + ":" + runnerID }

// OfferEntry is the entry of claimID's job accepted by runnerID at at, to be
// published by deadline.
func OfferEntry(claimID, runnerID string, at, deadline time.Time) Entry {
	return Entry{Type: TypeOffer, ClaimID: claimID, ID: OfferID(claimID, runnerID), Record: OfferRecord{
		RunnerID: runnerID, AcceptedAt: Time(at), PublishDeadline: Time(deadline)}}
}

// Comparison is one target's comparison with its numbers as the exact
// decimal text (canonical JSON would rewrite JSON numbers as doubles).
type Comparison struct {
	Name          string `json:"name"`
	Published     string `json:"published"`
	Rerun         string `json:"rerun"`
	Difference    string `json:"difference"`
	ToleranceType string `json:"tolerance_type"`
	Tolerance     string `json:"tolerance"`
	Allowed       string `json:"allowed"`
	Match         bool   `json:"match"`
}

func comparisons(cs []dotlab.Comparison) []Comparison {
	out := make([]Comparison, 0, len(cs))
	for _, c := range cs {
		out = append(out, Comparison{Name: c.Name, Published: string(c.Published), Rerun: string(c.Rerun), Difference: string(c.Difference),
			ToleranceType: c.ToleranceType, Tolerance: string(c.Tolerance), Allowed: string(c.Allowed), Match: c.Match})
	}
	return out
}

// Environment is a run's reported environment.
type Environment struct {
	ImageDigest       string              `json:"image_digest"`
	Seed              string              `json:"seed,omitempty"` // decimal text: canonical JSON numbers are doubles
	Runtime           *dotlab.RuntimeInfo `json:"runtime,omitempty"`
	CodeCommit        string              `json:"code_commit,omitempty"`
	CodeArchiveSHA256 string              `json:"code_archive_sha256,omitempty"`
	// CodeTreeSHA256 is the patched tree's hash (spec v0.2 code.patches);
	// absent otherwise, so earlier records keep their bytes.
	CodeTreeSHA256 string `json:"code_tree_sha256,omitempty"`
}

func environment(e dotlab.RunEnvironment) Environment {
	var seed string
	if e.Seed != nil {
		seed = strconv.FormatInt(*e.Seed, 10)
	}
	return Environment{ImageDigest: e.ImageDigest, Seed: seed, Runtime: e.Runtime, CodeCommit: e.CodeCommit, CodeArchiveSHA256: e.CodeArchiveSHA256, CodeTreeSHA256: e.CodeTreeSHA256}
}

func hashes(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// RunRecord is an official run as published (TypeRun; id: the run id): the
// server's comparisons (each with the runner's rerun value), the submitted
// hashes and environment, the notes' digest and the SHA-256 of the run's
// logs when they were uploaded.
type RunRecord struct {
	RunnerID     string            `json:"runner_id"`
	JobID        string            `json:"job_id"`
	Outcome      dotlab.Outcome    `json:"outcome"`
	Comparisons  []Comparison      `json:"comparisons"`
	InputHashes  map[string]string `json:"input_hashes"`
	OutputHashes map[string]string `json:"output_hashes"`
	// OutputListing pins the listing that holds every output's hash
	// when the record sent one (docs/protocol.md §6 "Output listing");
	// absent otherwise, so earlier records keep their bytes.
	OutputListing *dotlab.OutputListing `json:"output_listing,omitempty"`
	Environment   Environment           `json:"environment"`
	LogsURI       string                `json:"logs_uri,omitempty"`
	LogsSHA256    string                `json:"logs_sha256,omitempty"`
	NotesSHA256   string                `json:"notes_sha256"`
	PublishedAt   string                `json:"published_at"`
}

// RunEntry is the entry of run r, with the SHA-256 of its logs as the run
// pinned it (r.LogsSHA256; empty when it pinned none).
func RunEntry(r *dotlab.Run) Entry {
	b := r.Body
	return Entry{Type: TypeRun, ClaimID: r.ClaimID, ID: r.ID, Record: RunRecord{
		RunnerID: r.RunnerID, JobID: b.JobID, Outcome: r.Outcome, Comparisons: comparisons(r.Comparisons),
		InputHashes: hashes(b.InputHashes), OutputHashes: hashes(b.OutputHashes), OutputListing: b.OutputListing, Environment: environment(b.Environment),
		LogsURI: b.LogsURI, LogsSHA256: r.LogsSHA256, NotesSHA256: TextSHA256(b.Notes), PublishedAt: Time(r.PublishedAt)}}
}

// ChallengeRecord is a challenge as posted (TypeChallenge; id: the
// challenge id).
type ChallengeRecord struct {
	RunID        string            `json:"run_id"`
	ChallengerID string            `json:"challenger_id"`
	Agrees       bool              `json:"agrees"`
	Outcome      dotlab.Outcome    `json:"outcome"`
	Comparisons  []Comparison      `json:"comparisons"`
	InputHashes  map[string]string `json:"input_hashes"`
	OutputHashes map[string]string `json:"output_hashes"`
	// OutputListing: as RunRecord's.
	OutputListing *dotlab.OutputListing `json:"output_listing,omitempty"`
	NotesSHA256   string                `json:"notes_sha256"`
	CreatedAt     string                `json:"created_at"`
}

// ChallengeEntry is the entry of challenge ch.
func ChallengeEntry(ch *dotlab.Challenge) Entry {
	return Entry{Type: TypeChallenge, ClaimID: ch.ClaimID, ID: ch.ID, Record: ChallengeRecord{
		RunID: ch.RunID, ChallengerID: ch.ChallengerID, Agrees: ch.Agrees, Outcome: ch.Outcome, Comparisons: comparisons(ch.Comparisons),
		InputHashes: hashes(ch.InputHashes), OutputHashes: hashes(ch.OutputHashes), OutputListing: ch.OutputListing, NotesSHA256: TextSHA256(ch.Notes), CreatedAt: Time(ch.CreatedAt)}}
}

// VoteRecord is a reviewer's vote (TypeVote; id: VoteID).
type VoteRecord struct {
	ReviewerID      string `json:"reviewer_id"`
	Vote            string `json:"vote"`
	RationaleSHA256 string `json:"rationale_sha256"`
	CreatedAt       string `json:"created_at"`
}

// VoteID is a vote's id in the log: "DL-0001:ag_…" (a reviewer votes once
// per dispute).
func VoteID(claimID, reviewerID string) string { return claimID + ":" + reviewerID }

// VoteEntry is the entry of vote v.
func VoteEntry(v *dotlab.Vote) Entry {
	return Entry{Type: TypeVote, ClaimID: v.ClaimID, ID: VoteID(v.ClaimID, v.ReviewerID), Record: VoteRecord{
		ReviewerID: v.ReviewerID, Vote: v.Vote, RationaleSHA256: TextSHA256(v.Rationale), CreatedAt: Time(v.CreatedAt)}}
}

// CommitmentRecord is a sealed vote's commitment (TypeCommitment; id:
// VoteID): dotlab.VoteCommitment of the vote, which the vote's own entry,
// logged when the dispute is decided, lets anyone check with the salt the
// API then shows.
type CommitmentRecord struct {
	ReviewerID string `json:"reviewer_id"`
	Commitment string `json:"commitment"`
	Round      int    `json:"round"`
	CreatedAt  string `json:"created_at"`
}

// CommitmentEntry is the entry of reviewerID's commitment on claimID in
// round at time at.
func CommitmentEntry(claimID, reviewerID, commitment string, round int, at time.Time) Entry {
	return Entry{Type: TypeCommitment, ClaimID: claimID, ID: VoteID(claimID, reviewerID), Record: CommitmentRecord{
		ReviewerID: reviewerID, Commitment: commitment, Round: round, CreatedAt: Time(at)}}
}

// SettlementRecord is a claim's settlement (TypeSettlement; id: the claim
// id): the final outcome, the official run and when.
type SettlementRecord struct {
	Outcome   dotlab.Outcome `json:"outcome"`
	RunID     string         `json:"run_id,omitempty"`
	SettledAt string         `json:"settled_at"`
}

// SettlementEntry is the entry of claim c's settlement (c must be settled).
func SettlementEntry(c *dotlab.Claim) Entry {
	return Entry{Type: TypeSettlement, ClaimID: c.ID, ID: c.ID, Record: SettlementRecord{Outcome: c.Outcome, RunID: c.RunID, SettledAt: optTime(c.SettledAt)}}
}

// MessageRecord is a lab message's digest (TypeMessage; id: the message
// id): who wrote it, when, its place in the room and MessageDigest of the
// whole message.
type MessageRecord struct {
	AgentID   string `json:"agent_id"`
	Seq       int64  `json:"seq"`
	SHA256    string `json:"sha256"`
	CreatedAt string `json:"created_at"`
}

// messageText is what MessageDigest hashes.
type messageText struct {
	ID        string   `json:"id"`
	ClaimID   string   `json:"claim_id"`
	Seq       int64    `json:"seq"`
	AgentID   string   `json:"agent_id"`
	Type      string   `json:"type"`
	To        string   `json:"to"`
	Body      string   `json:"body"`
	Refs      []string `json:"refs"`
	CreatedAt string   `json:"created_at"`
}

// MessageDigest is the hex SHA-256 of the RFC 8785 canonical JSON of m's
// fields {agent_id, body, claim_id, created_at (TimeFormat), id, refs ([]
// when none), seq, to, type}.
func MessageDigest(m *dotlab.LabMessage) string {
	refs := m.Refs
	if refs == nil {
		refs = []string{}
	}
	raw, err := json.Marshal(messageText{ID: m.ID, ClaimID: m.ClaimID, Seq: m.Seq, AgentID: m.AgentID, Type: m.Type, To: m.To,
		Body: m.Body, Refs: refs, CreatedAt: Time(m.CreatedAt)})
	if err != nil {
		panic(err) // strings and integers always marshal
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		panic(err) // json.Marshal's output is valid JSON
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// MessageEntry is the entry of lab message m.
func MessageEntry(m *dotlab.LabMessage) Entry {
	return Entry{Type: TypeMessage, ClaimID: m.ClaimID, ID: m.ID, Record: MessageRecord{
		AgentID: m.AgentID, Seq: m.Seq, SHA256: MessageDigest(m), CreatedAt: Time(m.CreatedAt)}}
}

// EnvelopeRecord is a signed record's envelope (docs/verification.md
// "Signed records"): the record it signs (SubjectType, SubjectID), the DSSE
// payload type, the SHA-256 of the envelope's RFC 8785 canonical JSON
// (EnvelopeDigest) and the signing key's id (TypeEnvelope; id: "<subject
// type>:<subject id>", e.g. "run:run_…", "vote:DL-0001:ag_…").
type EnvelopeRecord struct {
	SubjectType    EntryType `json:"subject_type"`
	SubjectID      string    `json:"subject_id"`
	PayloadType    string    `json:"payload_type"`
	EnvelopeSHA256 string    `json:"envelope_sha256"`
	KeyID          string    `json:"keyid"`
}

// EnvelopeID is an envelope entry's id: "<subject type>:<subject id>".
func EnvelopeID(subjectType EntryType, subjectID string) string {
	return string(subjectType) + ":" + subjectID
}

// EnvelopeEntry is the entry of env, which signs record subjectID of type
// subjectType on claimID.
func EnvelopeEntry(subjectType EntryType, claimID, subjectID string, env *dotlab.Envelope) Entry {
	return Entry{Type: TypeEnvelope, ClaimID: claimID, ID: EnvelopeID(subjectType, subjectID), Record: EnvelopeRecord{
		SubjectType: subjectType, SubjectID: subjectID, PayloadType: env.PayloadType, EnvelopeSHA256: EnvelopeDigest(env), KeyID: env.SignedBy()}}
}

// EnvelopeDigest is the lowercase hex SHA-256 of env's RFC 8785 canonical
// JSON ({"payload","payloadType","signatures":[{"keyid","sig"}]}).
func EnvelopeDigest(env *dotlab.Envelope) string {
	raw, err := json.Marshal(env)
	if err != nil {
		panic(err) // strings only
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		panic(err) // json.Marshal's output is valid JSON
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
