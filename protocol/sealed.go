package protocol

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// Sealed votes (docs/mechanism.md §4a, `dotlab serve --sealed-votes`).
// Each round of a sealed dispute has a committee of Quorum reviewers.
// While it commits, a reviewer either commits to a hash of its vote
// (CommitVote) or posts its vote as the skill text says (CastVote), which
// the server seals under a salt of its own; no vote is shown anywhere
// until the dispute is decided. The commit phase ends when every seat has
// committed or at the commit deadline (uncommitted seats abstain); the
// reveal phase ends when every commitment is revealed (RevealVote) or at
// the reveal deadline (unrevealed ones abstain). The revealed votes then
// decide by the default mode's majority rule; with none revealed a new
// round draws a new committee. Abstentions cost standing.

// sealed reports whether the store runs disputes with sealed votes.
func (s *Service) sealed() bool { return s.Store.Windows().Sealed }

// nextSealedDispute is NextDispute in sealed mode: the dispute whose
// current round waits for the caller, else a seat drawn at random among
// the committees with a free seat.
func (s *Service) nextSealedDispute(ctx context.Context, agentID string) (*dotlab.Dispute, bool, error) {
	if id, found, err := s.Store.AssignedSealed(ctx, agentID); found || err != nil {
		return s.dispute(ctx, id, err)
	}
	w := s.Store.Windows()
	commitW, _ := w.SealedWindows()
	ids, err := s.Store.SealedCandidates(ctx, agentID, w.Quorum, maxDisputeCandidates)
	if err != nil {
		return nil, false, err
	}
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	at := s.now()
	for _, id := range ids {
		err := s.Store.AddSealedReviewer(ctx, id, agentID, w.Quorum, at, at.Add(commitW))
		if dotlab.ErrorCode(err) == dotlab.ECONFLICT || errors.Is(err, store.ErrCommitteeFull) {
			continue // took another role on it, or the committee filled, meanwhile
		}
		return s.dispute(ctx, id, err)
	}
	return nil, false, nil
}

// castSealedVote is CastVote in sealed mode: the vote, checked as in the
// default mode, is committed and held sealed under a salt the server
// draws.
func (s *Service) castSealedVote(ctx context.Context, reviewer *dotlab.Agent, c *dotlab.Claim, v dotlab.VoteBody) (*dotlab.Dispute, error) {
	salt, err := newSalt()
	if err != nil {
		return nil, err
	}
	at := s.now()
	vote := dotlab.Vote{ClaimID: c.ID, ReviewerID: reviewer.ID, Vote: v.Vote, Rationale: strings.TrimSpace(v.Rationale), CreatedAt: at, Salt: salt, Envelope: v.Envelope}
	commitment := dotlab.VoteCommitment(c.ID, reviewer.ID, vote.Vote, vote.Rationale, salt)
	return s.applySeat(ctx, c.ID, &store.SeatChange{ReviewerID: reviewer.ID, Commit: commitment, Vote: &vote, Salt: salt, Envelope: v.Envelope}, at)
}

// CommitVote is the commit step of sealed mode (POST
// /disputes/{id}/commit): the caller, a reviewer seated on claimID's
// current round in its commit phase, commits to
// dotlab.VoteCommitment of the vote it will reveal. Checks: the mode, the
// body's form and dispute_id, the claim, the caller's seat and phase.
//
// Errors: ENOSUCHROUTE (the server runs open votes), EINVALID, ENOTFOUND,
// EROLECONFLICT (not a reviewer of the claim), ECONFLICT (committed
// already), EWINDOWCLOSED (the commit phase ended, the seat abstained, or
// the dispute was decided).
func (s *Service) CommitVote(ctx context.Context, reviewer *dotlab.Agent, claimID string, b dotlab.CommitBody) (*dotlab.Dispute, error) {
	if !s.sealed() {
		return nil, errOpenVotes()
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	c, err := s.sealedClaim(ctx, reviewer, claimID, b.DisputeID)
	if err != nil {
		return nil, err
	}
	return s.applySeat(ctx, c.ID, &store.SeatChange{ReviewerID: reviewer.ID, Commit: b.Commitment}, s.now())
}

// RevealVote is the reveal step of sealed mode (POST
// /disputes/{id}/reveal): the caller reveals the vote, rationale and salt
// it committed to, in the reveal phase. Checks, in order: the mode, the
// body (every problem listed), the claim, the caller's seat, phase and
// commitment, then the rationale's targets, the secret screen and a
// signed vote's signature.
//
// Errors: as CommitVote's, and EINVALID at $.salt when the reveal does not
// match the commitment.
func (s *Service) RevealVote(ctx context.Context, reviewer *dotlab.Agent, claimID string, b dotlab.RevealBody) (*dotlab.Dispute, error) {
	if !s.sealed() {
		return nil, errOpenVotes()
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	c, err := s.sealedClaim(ctx, reviewer, claimID, b.DisputeID)
	if err != nil {
		return nil, err
	}
	seat, err := s.revealableSeat(ctx, c.ID, reviewer.ID)
	if err != nil {
		return nil, err
	}
	rationale := strings.TrimSpace(b.Rationale)
	if dotlab.VoteCommitment(c.ID, reviewer.ID, b.Vote, rationale, b.Salt) != seat.Commitment {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.salt: the vote, rationale and salt do not match your commitment %s: send exactly the vote, rationale and salt you committed to (docs/mechanism.md §4a)", seat.Commitment)
	}
	if err := s.refuseReplay(ctx, b.Envelope); err != nil {
		return nil, err
	}
	if _, err := s.checkVoteText(ctx, c, reviewer, b.VoteBody); err != nil {
		return nil, err
	}
	at := s.now()
	vote := dotlab.Vote{ClaimID: c.ID, ReviewerID: reviewer.ID, Vote: b.Vote, Rationale: rationale, CreatedAt: at, Salt: b.Salt, Envelope: b.Envelope}
	return s.applySeat(ctx, c.ID, &store.SeatChange{ReviewerID: reviewer.ID, Vote: &vote, Salt: b.Salt, Envelope: b.Envelope}, at)
}

// errOpenVotes refuses a sealed-mode step on a server running open votes.
func errOpenVotes() error {
	return dotlab.Errorf(dotlab.ENOSUCHROUTE, "this server runs open votes (its status says \"votes\": \"open\"): sealed votes are not there; vote by %s", dotlab.Go(dotlab.StepVote, "{id}"))
}

// sealedClaim is the claim a sealed step acts on, after the dispute_id,
// role and state checks CastVote makes.
func (s *Service) sealedClaim(ctx context.Context, reviewer *dotlab.Agent, claimID, disputeID string) (*dotlab.Claim, error) {
	if disputeID != "" && disputeID != claimID {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.dispute_id: is %q but you are acting on %s (the path): send the dispute's own id, or leave it out", disputeID, claimID)
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	return c, s.mayVote(ctx, c, reviewer.ID)
}

// revealableSeat is reviewerID's seat on claimID's current round when it
// may reveal now, else the error that says why not.
func (s *Service) revealableSeat(ctx context.Context, claimID, reviewerID string) (*store.SealedSeat, error) {
	r, _, err := s.Store.SealedRound(ctx, claimID)
	if err != nil {
		return nil, err
	}
	seat := findSeat(r, reviewerID)
	if seat == nil || seat.Abstained || seat.Commitment == "" || seat.Vote != nil || r.Phase != dotlab.PhaseReveal {
		return nil, seatRefusal(r, seat, false)
	}
	return seat, nil
}

// applySeat writes seat on claimID's current round, with its commitment's
// log entry and the round's rule, and explains a write that did not apply.
func (s *Service) applySeat(ctx context.Context, claimID string, seat *store.SeatChange, at time.Time) (*dotlab.Dispute, error) {
	r, _, err := s.Store.SealedRound(ctx, claimID)
	if err != nil {
		return nil, err
	}
	w := store.SealedWrite{Write: store.Write{At: at}, ClaimID: claimID, Seat: seat, Decide: sealedRule(claimID, s.Store.Windows(), at)}
	if seat.Commit != "" {
		w.Log = []tlogfmt.Entry{tlogfmt.CommitmentEntry(claimID, seat.ReviewerID, seat.Commit, r.Round, at)}
	}
	applied, err := s.Store.ApplySealed(ctx, w)
	if err != nil {
		return nil, err
	}
	if !applied {
		fresh, _, err := s.Store.SealedRound(ctx, claimID)
		if err != nil {
			return nil, err
		}
		return nil, seatRefusal(fresh, findSeat(fresh, seat.ReviewerID), seat.Commit != "")
	}
	return s.Store.FindDispute(ctx, claimID)
}

// findSeat is reviewerID's seat in round r, nil when it holds none there.
func findSeat(r store.SealedRound, reviewerID string) *store.SealedSeat {
	for i := range r.Seats {
		if r.Seats[i].ReviewerID == reviewerID {
			return &r.Seats[i]
		}
	}
	return nil
}

// seatRefusal says why seat (nil: none in the current round) of round r
// may not commit (commit true) or reveal now.
func seatRefusal(r store.SealedRound, seat *store.SealedSeat, commit bool) error {
	id, step := r.ClaimID, dotlab.Go(dotlab.StepDrawDispute, "")
	switch {
	case r.ClaimID == "" || seat == nil || seat.Abstained:
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "you hold no live seat on %s's current round (your seat abstained at a deadline, or the dispute was decided): %s draws another", id, step)
	case commit && seat.Commitment != "":
		return dotlab.Errorf(dotlab.ECONFLICT, "you already committed on %s: one vote per reviewer; reveal it by %s in the reveal phase", id, dotlab.Go(dotlab.StepReveal, id))
	case commit:
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the commit phase of %s ended at %s: your seat abstained", id, r.CommitDeadline.Format(time.RFC3339))
	case seat.Vote != nil:
		return dotlab.Errorf(dotlab.ECONFLICT, "the server already holds your vote on %s: one vote per reviewer", id)
	case r.Phase == dotlab.PhaseCommit:
		return dotlab.Errorf(dotlab.ECONFLICT, "%s is still in its commit phase: reveal once every seat has committed or after %s", id, r.CommitDeadline.Format(time.RFC3339))
	default:
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the reveal phase of %s has ended: your commitment abstained", id)
	}
}

// newSalt is a server-drawn salt: 32 random bytes as 64 hex characters.
func newSalt() (string, error) {
	b := make([]byte, 32)
	if _, err := crand.Read(b); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	return hex.EncodeToString(b), nil
}
