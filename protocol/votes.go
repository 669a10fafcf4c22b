package protocol

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// CastVote is the vote step (docs/mechanism.md §4) of a reviewer assigned
// dispute claimID by NextDispute. In order: the body's side and rationale
// length (dotlab.VoteBody.Validate) and dispute_id; a signed body's
// statement is not used already (refuseReplay); the claim; the caller
// is its assigned reviewer and has not voted; the claim is disputed; the
// rationale names a target of the claim (dotlab.CheckRationaleTargets) and
// passes the secret screen; a signed vote is the reviewer's signature (its
// rationale without outer white space, since the rationale is stored
// trimmed), bound to this log and reviewer when v2 (checkSigned). Under
// sealed votes the checked vote is sealed instead (castSealedVote,
// docs/mechanism.md §4a). When the quorum is in, the majority decides: "runner" settles
// with the run's outcome, "challenger" with the outcome of the first
// disagreeing challenge; the claim goes disputed → reviewed → settled.
//
// Errors: EINVALID, ENOTFOUND, ENOTOFFERED (not drawn as its reviewer),
// EROLECONFLICT (another role on the claim), ECONFLICT (voted already),
// EWINDOWCLOSED (no longer disputed).
func (s *Service) CastVote(ctx context.Context, reviewer *dotlab.Agent, claimID string, v dotlab.VoteBody) (*dotlab.Dispute, error) {
	p := v.Problems()
	if v.DisputeID != "" && v.DisputeID != claimID {
		p.Add("$.dispute_id", "is %q but you are voting on %s (the path): send the dispute's own id, or leave it out", v.DisputeID, claimID)
	}
	if err := p.Err(); err != nil {
		return nil, err // every problem found without the database, in one answer
	}
	if err := s.refuseReplay(ctx, v.Envelope); err != nil {
		return nil, err
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	if err := s.mayVote(ctx, c, reviewer.ID); err != nil {
		return nil, err
	}
	signed, err := s.checkVoteText(ctx, c, reviewer, v)
	if err != nil {
		return nil, err
	}
	if s.sealed() {
		return s.castSealedVote(ctx, reviewer, c, v)
	}
	signed.SubjectID = tlogfmt.VoteID(claimID, reviewer.ID)
	vote := dotlab.Vote{ClaimID: claimID, ReviewerID: reviewer.ID, Vote: v.Vote, Rationale: strings.TrimSpace(v.Rationale), CreatedAt: s.now()}
	w := store.VoteWrite{Write: store.Write{At: vote.CreatedAt, Log: []tlogfmt.Entry{tlogfmt.VoteEntry(&vote)}}, Vote: vote, Envelope: v.Envelope,
		Statement: signed, Tally: quorumRule(claimID, s.Store.Windows().Quorum, vote.CreatedAt)}
	if v.Envelope != nil {
		w.Log = append(w.Log, tlogfmt.EnvelopeEntry(tlogfmt.TypeVote, claimID, tlogfmt.VoteID(claimID, reviewer.ID), v.Envelope))
	}
	applied, err := s.Store.AddVote(ctx, w)
	if dotlab.ErrorCode(err) == dotlab.ECONFLICT {
		return nil, dotlab.Errorf(dotlab.ECONFLICT, "you already voted on %s: one vote per reviewer", claimID)
	}
	if err != nil {
		return nil, err
	}
	if !applied {
		return nil, dotlab.Errorf(dotlab.EWINDOWCLOSED, "%s is no longer disputed (the quorum was reached): %s draws another", claimID, dotlab.Go(dotlab.StepDrawDispute, ""))
	}
	return s.Store.FindDispute(ctx, claimID)
}

// quorumRule is the review's rule (docs/mechanism.md §4) for the votes on
// claimID counted at time at: below the quorum nothing settles; at it the
// majority decides — "runner" settles with the run's outcome,
// "challenger" with the first disagreeing challenge's — and the claim goes
// disputed → reviewed → settled, its settlement logged.
func quorumRule(claimID string, quorum int, at time.Time) func(dotlab.Tally, string, dotlab.Outcome, dotlab.Outcome) *store.Settlement {
	return func(t dotlab.Tally, runID string, run, first dotlab.Outcome) *store.Settlement {
		if dotlab.VoteEvent(t, quorum) != dotlab.EventQuorum {
			return nil
		}
		tr, err := dotlab.Next(dotlab.StateDisputed, dotlab.EventQuorum)
		if err != nil {
			return nil // the table always has this move
		}
		side := t.Majority()
		final := dotlab.Verdict(side, run, first)
		return &store.Settlement{Transition: tr, Outcome: final,
			History: []string{"quorum reached: " + t.String() + "; majority sides with the " + side, "settled by review: " + string(final)},
			Log:     []tlogfmt.Entry{tlogfmt.SettlementEntry(&dotlab.Claim{ID: claimID, Outcome: final, RunID: runID, SettledAt: &at})}}
	}
}

// mayVote checks the caller's role on claim c (its assigned reviewer, not
// yet voted) and the claim's state.
func (s *Service) mayVote(ctx context.Context, c *dotlab.Claim, agentID string) error {
	role, err := s.Store.RoleOf(ctx, c.ID, agentID)
	if err != nil {
		return err
	}
	switch role {
	case dotlab.RoleReviewer:
		voted, err := s.Store.HasVoted(ctx, c.ID, agentID)
		if err != nil {
			return err
		}
		if voted {
			return dotlab.Errorf(dotlab.ECONFLICT, "you already voted on %s: one vote per reviewer", c.ID)
		}
	case "":
		return dotlab.Errorf(dotlab.ENOTOFFERED, "%s is not assigned to you: reviewers are drawn at random; %s assigns you one", c.ID, dotlab.Go(dotlab.StepDrawDispute, ""))
	default:
		return dotlab.Errorf(dotlab.EROLECONFLICT, "you are the %s of %s: reviewers must hold no other role on the claim; %s draws a dispute you may review", role, c.ID, dotlab.Go(dotlab.StepDrawDispute, ""))
	}
	_, err = c.Next(dotlab.EventVote)
	return err
}

// checkVoteText holds the rationale to the claim's targets and the secret
// screen, and a signed vote to its signature (checkSigned), whose statement
// it returns.
func (s *Service) checkVoteText(ctx context.Context, c *dotlab.Claim, reviewer *dotlab.Agent, v dotlab.VoteBody) (store.SignedStatement, error) {
	if err := dotlab.CheckRationaleTargets(v.Rationale, c.Manifest.TargetNames()); err != nil {
		return store.SignedStatement{}, err
	}
	if err := s.screenText(map[string]string{"$.rationale": v.Rationale}); err != nil {
		return store.SignedStatement{}, err
	}
	if v.Envelope != nil && strings.TrimSpace(v.Rationale) != v.Rationale {
		return store.SignedStatement{}, dotlab.Errorf(dotlab.EINVALID, "$.rationale: a signed rationale must not start or end with white space (it is stored trimmed, and would then differ from what you signed): trim it, then sign")
	}
	return s.checkSignedVote(ctx, reviewer, c.ID, &v)
}

// maxDisputeCandidates bounds the disputes one reviewer draw considers.
const maxDisputeCandidates = 1000

// NextDispute is the reviewer draw (docs/mechanism.md §4): the caller is
// assigned a dispute drawn at random among disputed claims on which it
// holds no role, and gets its evidence. The assignment is the reviewer
// role on that claim: only assigned reviewers may vote, so reviewers
// cannot pick the dispute they vote on. While the caller has an assigned
// dispute it has not voted on, NextDispute returns that one. found is
// false when there is none.
func (s *Service) NextDispute(ctx context.Context, agentID string) (*dotlab.Dispute, bool, error) {
	if s.sealed() {
		return s.nextSealedDispute(ctx, agentID)
	}
	if id, found, err := s.Store.AssignedDispute(ctx, agentID); found || err != nil {
		return s.dispute(ctx, id, err)
	}
	ids, err := s.Store.DisputeCandidates(ctx, agentID, maxDisputeCandidates)
	if err != nil {
		return nil, false, err
	}
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	at := s.now()
	for _, id := range ids {
		err := s.Store.AddReviewer(ctx, id, agentID, at)
		if dotlab.ErrorCode(err) == dotlab.ECONFLICT {
			continue // took another role on it meanwhile
		}
		return s.dispute(ctx, id, err)
	}
	return nil, false, nil
}

// dispute is the evidence of dispute id, after err from assigning it.
func (s *Service) dispute(ctx context.Context, id string, err error) (*dotlab.Dispute, bool, error) {
	if err != nil {
		return nil, false, err
	}
	d, err := s.Store.FindDispute(ctx, id)
	return d, err == nil, err
}
