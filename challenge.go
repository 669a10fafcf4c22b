package dotlab

import (
	"context"
	"strings"
	"time"
)

// ChallengeBody is the body of POST /challenges (docs/protocol.md §7): a run
// body plus the claim (claim_id; run_id accepted too, as in the dotsci
// draft) and whether the challenger agrees with the official run (Agrees).
type ChallengeBody struct {
	RunBody
	ClaimID string `json:"claim_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Agrees  *bool  `json:"agrees"`
}

// Problems lists every problem of a challenge body that can be found
// without the database, each as "path: what to fix": the run body's
// (RunBody.Problems, less the job_id, which a challenge may leave out), a
// claim_id or run_id, and agrees.
func (b *ChallengeBody) Problems() Problems {
	p := b.formProblems()
	if b.ClaimID == "" && b.RunID == "" {
		p.Add("$.claim_id", "required (the claim whose run you rerun; run_id is accepted too)")
	}
	if b.ClaimID != "" && b.JobID != "" && b.JobID != b.ClaimID {
		p.Add("$.job_id", "%q is not the challenged claim %s (leave it empty or give the claim id)", b.JobID, b.ClaimID)
	}
	if b.Agrees == nil {
		p.Add("$.agrees", "required: true when your outcome equals the run's, false otherwise")
	}
	return p
}

// Challenge is an independent rerun posted during the challenge window.
// Differences holds, per target, the challenger's rerun minus the runner's
// rerun, as the server computed them.
type Challenge struct {
	ID           string       `json:"id"`
	ClaimID      string       `json:"claim_id"`
	RunID        string       `json:"run_id"`
	ChallengerID string       `json:"challenger_id"`
	Agrees       bool         `json:"agrees"`
	Outcome      Outcome      `json:"outcome"`
	Comparisons  []Comparison `json:"comparisons"`
	Differences  []Difference `json:"differences"`
	// InputHashes and OutputHashes are the challenger's own, as submitted.
	InputHashes  map[string]string `json:"input_hashes"`
	OutputHashes map[string]string `json:"output_hashes"`
	// OutputListing pins the challenger's output listing when it sent one
	// (RunBody.OutputListing); absent otherwise.
	OutputListing *OutputListing `json:"output_listing,omitempty"`
	Notes         string         `json:"notes,omitempty"`
	CreatedAt     time.Time      `json:"created_at"`
	// Envelope is the challenge's signature as posted, its predicate the
	// whole challenge body (absent: unsigned); SignedBy its key id
	// (docs/verification.md "Signed records").
	Envelope *Envelope `json:"envelope,omitempty"`
	SignedBy string    `json:"signed_by,omitempty"`
}

// Difference is one target compared between the challenger's and the
// runner's rerun values: Delta = challenger − runner.
type Difference struct {
	Name       string  `json:"name"`
	Runner     Decimal `json:"runner"`
	Challenger Decimal `json:"challenger"`
	Delta      Decimal `json:"delta"`
	// RunnerMatch and ChallengerMatch say whether each side is within tolerance.
	RunnerMatch     bool `json:"runner_match"`
	ChallengerMatch bool `json:"challenger_match"`
}

// MatchDiffers reports whether the target is within tolerance on one side
// and outside on the other: a target a disagreeing challenge's notes must
// name (docs/mechanism.md §3 "The notes rule").
func (d Difference) MatchDiffers() bool { return d.RunnerMatch != d.ChallengerMatch }

// Differences compares a challenger's comparisons with the run's, target by
// target.
func Differences(run, challenger []Comparison) []Difference {
	byName := make(map[string]Comparison, len(run))
	for _, c := range run {
		byName[c.Name] = c
	}
	out := make([]Difference, 0, len(challenger))
	for _, c := range challenger {
		r, ok := byName[c.Name]
		if !ok {
			continue
		}
		d := Difference{Name: c.Name, Runner: r.Rerun, Challenger: c.Rerun, RunnerMatch: r.Match, ChallengerMatch: c.Match}
		a, err1 := c.Rerun.Rat()
		b, err2 := r.Rerun.Rat()
		if err1 == nil && err2 == nil {
			d.Delta = DecimalFromRat(a.Sub(a, b))
		}
		out = append(out, d)
	}
	return out
}

// CheckDisagreementNotes is the notes rule of docs/mechanism.md §3: a
// disagreeing challenge's notes name every comparison whose match differs
// from the run's (as a whole word in any letter case, MentionsName, as a
// vote's rationale names a target), and say by how much (a number must
// appear in the notes). It returns nil or an EINVALID error
// listing what to add. The error names each missing comparison with the
// challenger's own value and which side is within tolerance, never the
// runner's value or the difference (docs/protocol.md §7).
func CheckDisagreementNotes(notes string, diffs []Difference) error {
	var p Problems
	if strings.TrimSpace(notes) == "" {
		p.Add("$.notes", "a disagreeing challenge must state which comparison differs and by how much")
		return p.Err()
	}
	named := false
	for _, d := range diffs {
		if !d.MatchDiffers() {
			continue
		}
		if !MentionsName(notes, d.Name) {
			p.Add("$.notes", "name the comparison %q and say by how much it differs: your rerun %s is %s tolerance, the run's value is %s it (%s shows the run's values, now that you have your own)",
				d.Name, d.Challenger, within(d.ChallengerMatch), within(d.RunnerMatch), Go(StepRun, "{run_id}"))
			continue
		}
		named = true
	}
	if named && !strings.ContainsAny(notes, "0123456789") {
		p.Add("$.notes", "say by how much the comparison differs (give the numbers)")
	}
	return p.Err()
}

// ChallengeService posts challenges and handles disputes (package protocol
// implements it).
type ChallengeService interface {
	// CreateChallenge records a challenge on a run in its challenge window.
	CreateChallenge(ctx context.Context, challenger *Agent, body *ChallengeBody, raw []byte) (*Challenge, error)
	// FindChallenges lists a claim's challenges in order.
	FindChallenges(ctx context.Context, claimID string) ([]*Challenge, error)
	// NextDispute returns a disputed claim the caller holds no role on;
	// found is false when there is none.
	NextDispute(ctx context.Context, agentID string) (d *Dispute, found bool, err error)
	// FindDispute returns a dispute by claim id.
	FindDispute(ctx context.Context, claimID string) (*Dispute, error)
	// CastVote records a reviewer's vote; the quorum's majority settles the claim.
	CastVote(ctx context.Context, reviewer *Agent, claimID string, v VoteBody) (*Dispute, error)
	// MarkChallengeable marks listed runs with whether agentID may
	// challenge each now, and why not.
	MarkChallengeable(ctx context.Context, agentID string, runs []*RunListing) error
	// CommitVote and RevealVote are the two steps of sealed votes
	// (docs/mechanism.md §4a); ENOSUCHROUTE on a server with open votes.
	CommitVote(ctx context.Context, reviewer *Agent, claimID string, b CommitBody) (*Dispute, error)
	RevealVote(ctx context.Context, reviewer *Agent, claimID string, b RevealBody) (*Dispute, error)
}

// within is "within" or "outside", for a comparison's match.
func within(match bool) string {
	if match {
		return "within"
	}
	return "outside"
}
