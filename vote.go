package dotlab

import (
	"strings"
	"time"
)

// Vote sides.
const (
	VoteRunner     = "runner"
	VoteChallenger = "challenger"
)

// Vote is one reviewer's vote on a dispute.
type Vote struct {
	ClaimID    string    `json:"claim_id"`
	ReviewerID string    `json:"reviewer_id"`
	Vote       string    `json:"vote"`
	Rationale  string    `json:"rationale"`
	CreatedAt  time.Time `json:"created_at"`
}

// VoteBody is the body of POST /disputes/{id}/vote.
type VoteBody struct {
	Vote      string `json:"vote"`
	Rationale string `json:"rationale"`
}

// Validate checks the vote side and the 20-2000 character rationale.
func (v VoteBody) Validate() error {
	var p Problems
	if v.Vote != VoteRunner && v.Vote != VoteChallenger {
		p.Add("$.vote", "must be \"runner\" or \"challenger\"")
	}
	if n := len([]rune(strings.TrimSpace(v.Rationale))); n < 20 || n > 2000 {
		p.Add("$.rationale", "is %d characters; give 20-2000, tied to specific comparisons", n)
	}
	return p.Err()
}
