package dotlab

import (
	"strings"
	"time"
)

// MinRationale and MaxRationale bound a vote's rationale, in characters
// after trimming.
const (
	MinRationale = 20
	MaxRationale = 2000
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
	// Envelope is the vote's signature as posted (absent: unsigned);
	// SignedBy its key id (docs/verification.md "Signed records").
	Envelope *Envelope `json:"envelope,omitempty"`
	SignedBy string    `json:"signed_by,omitempty"`
	// Salt is a sealed vote's salt (docs/mechanism.md §4a), shown once the
	// dispute is decided so anyone can check its logged commitment
	// (VoteCommitment); absent in the default mode.
	Salt string `json:"salt,omitempty"`
}

// VoteBody is the body of POST /disputes/{id}/vote.
type VoteBody struct {
	Vote      string `json:"vote"`
	Rationale string `json:"rationale"`
	// DisputeID, when given, must be the dispute voted on (the path's id);
	// a signed vote gives it so its signature binds the dispute.
	DisputeID string `json:"dispute_id,omitempty"`
	// Envelope, when present, signs this body without the envelope
	// (docs/verification.md "Signed records").
	Envelope *Envelope `json:"envelope,omitempty"`
}

// Validate checks the vote side and the 20-2000 character rationale.
func (v VoteBody) Validate() error { return v.Problems().Err() }

// Problems lists every problem of the vote's side and rationale length
// (what Validate refuses), each as "path: what to fix".
func (v VoteBody) Problems() Problems {
	var p Problems
	if v.Vote != VoteRunner && v.Vote != VoteChallenger {
		p.Add("$.vote", "must be \"runner\" or \"challenger\"")
	}
	if n := len([]rune(strings.TrimSpace(v.Rationale))); n < MinRationale || n > MaxRationale {
		p.Add("$.rationale", "is %d characters; give 20-2000, tied to specific comparisons", n)
	}
	return p
}

// CheckRationaleTargets is the rule that a rationale is "tied to specific
// comparisons" (agent-skill "Reviewer workflow"; docs/mechanism.md §4): it
// names at least one of the dispute's targets (targets, the manifest's
// target names, which are also the names of its comparisons), as a whole
// word, in any letter case. It returns nil, or an EINVALID error at
// $.rationale that lists the targets.
func CheckRationaleTargets(rationale string, targets []string) error {
	if len(targets) == 0 {
		return nil
	}
	for _, t := range targets {
		if MentionsName(rationale, t) {
			return nil
		}
	}
	return Errorf(EINVALID, "$.rationale: name at least one target of the dispute and what its comparisons show (the targets are %s), e.g. \"%s: …\"",
		strings.Join(targets, ", "), targets[0])
}

// MentionsName reports whether text contains name as a whole word: not
// preceded or followed by a letter, digit or underscore; letter case is
// ignored. So "t" is not found in "the t_paired value", but "sd_diff" is
// found in "sd_diff: 1.17".
func MentionsName(text, name string) bool {
	if name == "" {
		return false
	}
	text, name = strings.ToLower(text), strings.ToLower(name)
	for from := 0; ; {
		i := strings.Index(text[from:], name)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(name)
		if (i == 0 || !wordByte(text[i-1])) && (end == len(text) || !wordByte(text[end])) {
			return true
		}
		from = i + 1
	}
}

func wordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
