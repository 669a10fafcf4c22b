package dotlab

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Sealed votes (docs/mechanism.md §4a, `dotlab serve --sealed-votes`): a
// dispute's votes stay hidden until it is decided, and a reviewer may
// commit to its vote before revealing it, so no reviewer sees another's
// vote before its own is fixed. The default mode (the skill text's "votes
// so far") is unchanged.

// The phases of a sealed round.
const (
	// PhaseCommit: the round's committee is being drawn and commits (a
	// commitment, or a vote the server seals). It ends when every seat of
	// the committee (the quorum) has committed, or at the commit deadline.
	PhaseCommit = "commit"
	// PhaseReveal: committed reviewers reveal; it ends when every
	// commitment is revealed, or at the reveal deadline, and the revealed
	// votes decide.
	PhaseReveal = "reveal"
)

// SealedVote is one committee seat of a sealed round as the API shows it
// before the dispute is decided: who, when it committed, and the salted
// commitment (VoteCommitment); never the vote or the rationale.
type SealedVote struct {
	ReviewerID string `json:"reviewer_id"`
	// CommittedAt is nil while the seat has not committed.
	CommittedAt *time.Time `json:"committed_at"`
	Commitment  string     `json:"commitment,omitempty"` // 64 lowercase hex
	// Revealed says that the server holds the vote (revealed by its
	// reviewer, or posted with POST /disputes/{id}/vote and sealed by the
	// server); it is still not shown.
	Revealed bool `json:"revealed"`
	// Abstained says the seat missed its deadline: an abstention, which
	// costs standing (AgentRecord.Abstained).
	Abstained bool `json:"abstained,omitempty"`
}

// Seal is the state of a sealed dispute's current round
// (Dispute.Sealed): its phase and deadlines and its committee.
type Seal struct {
	Round          int          `json:"round"`
	Phase          string       `json:"phase"` // PhaseCommit or PhaseReveal
	CommitDeadline time.Time    `json:"commit_deadline"`
	RevealDeadline *time.Time   `json:"reveal_deadline,omitempty"` // set in PhaseReveal
	Votes          []SealedVote `json:"votes"`                     // the round's seats, by commit time
}

// CommitBody is the body of POST /disputes/{id}/commit.
type CommitBody struct {
	// Commitment is VoteCommitment of the vote to reveal later.
	Commitment string `json:"commitment"`
	DisputeID  string `json:"dispute_id,omitempty"`
}

// RevealBody is the body of POST /disputes/{id}/reveal: the vote
// committed to and its salt. Envelope, when present, signs the vote as a
// signed vote does (VoteBody without salt).
type RevealBody struct {
	VoteBody
	Salt string `json:"salt"`
}

// Salt bounds: 32 to 128 lowercase hex characters (128 to 512 bits).
const (
	MinSaltHex = 32
	MaxSaltHex = 128
)

// Validate checks the commitment's form (64 lowercase hex).
func (b CommitBody) Validate() error {
	var p Problems
	if !isLowerHex(b.Commitment, 64, 64) {
		p.Add("$.commitment", "must be 64 lowercase hex characters: the SHA-256 of your vote (docs/mechanism.md §4a gives the bytes)")
	}
	return p.Err()
}

// Validate checks the vote (VoteBody.Validate) and the salt, listing
// every problem.
func (b RevealBody) Validate() error {
	var p Problems
	if err := b.VoteBody.Validate(); err != nil {
		p = append(p, err.(*Error).Detail...)
	}
	if !isLowerHex(b.Salt, MinSaltHex, MaxSaltHex) {
		p.Add("$.salt", "must be %d-%d lowercase hex characters: the salt you committed with", MinSaltHex, MaxSaltHex)
	}
	return p.Err()
}

// VoteCommitment is the commitment to a vote: the lowercase hex SHA-256 of
//
//	"dotlab-vote-commitment/v1\n" claim "\n" reviewer "\n" vote "\n" salt "\n" rationale
//
// with the rationale trimmed of outer white space (as it is stored).
func VoteCommitment(claimID, reviewerID, vote, rationale, salt string) string {
	h := sha256.New()
	for _, s := range []string{"dotlab-vote-commitment/v1", claimID, reviewerID, vote, salt} {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	h.Write([]byte(strings.TrimSpace(rationale)))
	return hex.EncodeToString(h.Sum(nil))
}

func isLowerHex(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
