package protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// sealedRule is the sealed round's rule (docs/mechanism.md §4a) at time
// at, for a round of claimID read under the claim's row lock: nil while
// nothing ends. The commit phase ends only when a full committee (the
// quorum) has committed; at its deadline the seats that have not
// committed abstain, freeing their seats for new reviewers, and the
// deadline moves on by the commit window, so no dispute is decided by
// fewer commitments than the quorum. The reveal phase ends when every
// commitment is revealed or at its deadline (the unrevealed abstain); the
// revealed votes then settle the claim by the default mode's majority
// rule (quorumRule's), made public and logged, if they are at least a
// majority of the committee; else a new round draws a new committee.
func sealedRule(claimID string, w dotlab.Windows, at time.Time) func(store.SealedRound) *store.SealedDecision {
	commitW, revealW := w.SealedWindows()
	return func(r store.SealedRound) *store.SealedDecision {
		d := &store.SealedDecision{Round: r.Round, Phase: r.Phase, CommitDeadline: r.CommitDeadline, RevealDeadline: r.RevealDeadline}
		live := liveSeats(r.Seats)
		if r.Phase == dotlab.PhaseCommit {
			committed, uncommitted := splitSeats(live, func(st store.SealedSeat) bool { return st.Commitment != "" })
			if len(committed) < w.Quorum {
				if at.Before(r.CommitDeadline) {
					return nil
				}
				abstain(d, uncommitted)
				d.CommitDeadline = at.Add(commitW)
				return d
			}
			d.Phase, d.RevealDeadline = dotlab.PhaseReveal, at.Add(revealW)
			live = committed
		}
		revealed, unrevealed := splitSeats(live, func(st store.SealedSeat) bool { return st.Vote != nil })
		if len(unrevealed) > 0 && at.Before(d.RevealDeadline) {
			if d.Phase != r.Phase {
				return d
			}
			return nil
		}
		abstain(d, unrevealed)
		if len(revealed) < w.Quorum/2+1 {
			return nextRound(d, at, commitW) // fewer than a majority of the committee revealed
		}
		decide(d, claimID, r, revealed, at)
		return d
	}
}

// liveSeats are the seats that have not abstained.
func liveSeats(seats []store.SealedSeat) []store.SealedSeat {
	live, _ := splitSeats(seats, func(st store.SealedSeat) bool { return !st.Abstained })
	return live
}

// splitSeats splits seats by keep.
func splitSeats(seats []store.SealedSeat, keep func(store.SealedSeat) bool) (yes, no []store.SealedSeat) {
	for _, st := range seats {
		if keep(st) {
			yes = append(yes, st)
		} else {
			no = append(no, st)
		}
	}
	return yes, no
}

// abstain marks seats as abstaining in d.
func abstain(d *store.SealedDecision, seats []store.SealedSeat) {
	for _, st := range seats {
		d.Abstain = append(d.Abstain, st.ReviewerID)
	}
}

// nextRound starts a new round in d: no commitment was revealed, so a
// new committee is drawn (the old seats keep their reviewer role).
func nextRound(d *store.SealedDecision, at time.Time, commitW time.Duration) *store.SealedDecision {
	d.Round++
	d.Phase, d.CommitDeadline, d.RevealDeadline = dotlab.PhaseCommit, at.Add(commitW), time.Time{}
	return d
}

// decide settles the round in d with the revealed votes: they are made
// public and logged (each with its envelope), and the majority decides as
// in the default mode.
func decide(d *store.SealedDecision, claimID string, r store.SealedRound, revealed []store.SealedSeat, at time.Time) {
	votes := make([]dotlab.Vote, 0, len(revealed))
	for _, st := range revealed {
		v := *st.Vote
		votes = append(votes, v)
		d.Log = append(d.Log, tlogfmt.VoteEntry(&v))
		if v.Envelope != nil {
			d.Log = append(d.Log, tlogfmt.EnvelopeEntry(tlogfmt.TypeVote, claimID, tlogfmt.VoteID(claimID, v.ReviewerID), v.Envelope))
		}
	}
	d.Publish = revealed
	t := dotlab.CountVotes(votes)
	tr, err := dotlab.Next(dotlab.StateDisputed, dotlab.EventQuorum)
	if err != nil {
		return // the table always has this move
	}
	side := t.Majority()
	final := dotlab.Verdict(side, r.Run, r.First)
	d.Settlement = &store.Settlement{Transition: tr, Outcome: final,
		History: []string{fmt.Sprintf("sealed votes revealed: %s, %d abstained; majority sides with the %s", t, len(d.Abstain), side), "settled by review: " + string(final)},
		Log:     []tlogfmt.Entry{tlogfmt.SettlementEntry(&dotlab.Claim{ID: claimID, Outcome: final, RunID: r.RunID, SettledAt: &at})}}
}

// settleSealed is the settlement clock's step for sealed rounds whose
// deadline passed: each is one conditional write (store.SealedWrite with
// no seat), so sweeps by several servers apply each once.
func (s *Service) settleSealed(ctx context.Context, rep *dotlab.SettleReport, now time.Time) error {
	for {
		ids, err := s.Store.SealedDue(ctx, now, settleBatch)
		if err != nil {
			return err
		}
		for _, id := range ids {
			applied, err := s.Store.ApplySealed(ctx, store.SealedWrite{Write: store.Write{At: now}, ClaimID: id, Decide: sealedRule(id, s.Store.Windows(), now)})
			if err != nil {
				return err
			}
			if applied {
				rep.Changed = append(rep.Changed, id)
			}
		}
		if len(ids) < settleBatch {
			return nil
		}
	}
}
