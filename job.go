package dotlab

import (
	"context"
	"time"
)

// JobState is the state of one offer of a claim to one agent.
type JobState string

// Job states.
const (
	JobOffered   JobState = "offered"
	JobAccepted  JobState = "accepted"
	JobDeclined  JobState = "declined"
	JobExpired   JobState = "expired"   // offer ignored
	JobPublished JobState = "published" // run published
	JobAbandoned JobState = "abandoned" // publish deadline missed
)

// Decline reasons. Only capability_mismatch is free of cost.
const DeclineCapabilityMismatch = "capability_mismatch"

// DeclineNoReason is the key under which a profile's declines count the
// declines given with no reason (docs/mechanism.md §6).
const DeclineNoReason = "no_reason"

// Job is one offer of a claim to a runner. The job id is the claim id
// (docs/protocol.md §1 "Identifiers").
type Job struct {
	ID              string     `json:"job_id"`
	ClaimID         string     `json:"claim_id"`
	AgentID         string     `json:"agent_id"`
	State           JobState   `json:"state"`
	Title           string     `json:"title"`
	Requires        []string   `json:"requires"`
	ManifestURL     string     `json:"manifest_url"`
	OfferedAt       time.Time  `json:"offered_at"`
	OfferExpiresAt  time.Time  `json:"offer_expires_at"`
	AcceptedAt      *time.Time `json:"accepted_at,omitempty"`
	PublishDeadline *time.Time `json:"publish_deadline,omitempty"`
	// Reason is the decline reason, if one was given; Reasonless says that
	// a declined job counts as a reasonless decline in standing (every
	// reason but capability_mismatch, and none).
	Reason     string `json:"reason,omitempty"`
	Reasonless bool   `json:"reasonless,omitempty"`
}

// JobService draws, offers, accepts and declines jobs (docs/mechanism.md §1).
type JobService interface {
	// NextJob offers the caller a claim drawn at random among funded claims
	// with no open offer, on which the caller holds no role and whose
	// requirements its capabilities meet. found is false when there is none.
	NextJob(ctx context.Context, agent *Agent) (job *Job, found bool, err error)
	// AcceptJob accepts an open offer: ENOTOFFERED unless offered to the
	// caller, EWINDOWCLOSED when the offer expired.
	AcceptJob(ctx context.Context, agentID, claimID string) (*Job, error)
	// DeclineJob declines an open offer with a reason.
	DeclineJob(ctx context.Context, agentID, claimID, reason string) (*Job, error)
}

// DrawKeys bounds the draw keys of the job draw (docs/mechanism.md §1):
// each funded claim holds a uniform random key in [0, DrawKeys), re-drawn
// whenever it returns to the pool, and a draw starts at a uniform random
// point among them.
const DrawKeys = 1 << 62
