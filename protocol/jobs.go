package protocol

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

var _ dotlab.JobService = (*Service)(nil)

// AcceptJob is the accept step (docs/protocol.md §4, dotlab.EventAccept)
// of the caller's open offer: the claim becomes assigned with a publish
// deadline (the publish window from now), the caller takes the runner
// role, and the acceptance is logged. Errors: ENOTFOUND, ENOTOFFERED (not
// offered to the caller), EWINDOWCLOSED (the offer expired), ECONFLICT
// (accepted or declined already), EROLECONFLICT (another role on the
// claim).
func (s *Service) AcceptJob(ctx context.Context, agentID, claimID string) (*dotlab.Job, error) {
	t, err := dotlab.Next(dotlab.StateFunded, dotlab.EventAccept)
	if err != nil {
		return nil, err
	}
	at := s.now()
	deadline := at.Add(s.Store.Windows().Publish)
	w := store.AcceptWrite{Write: store.Write{At: at, Log: []tlogfmt.Entry{tlogfmt.OfferEntry(claimID, agentID, at, deadline)}},
		ClaimID: claimID, AgentID: agentID, Transition: t, PublishDeadline: deadline, History: []string{"runner " + agentID + " accepted"}}
	applied, err := s.Store.AddAccept(ctx, w)
	if dotlab.ErrorCode(err) == dotlab.ECONFLICT {
		return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "you already hold another role on %s, and an agent holds one role per claim: decline the offer (%s)", claimID, dotlab.Go(dotlab.StepDecline, claimID))
	}
	return s.offerTaken(ctx, agentID, claimID, at, dotlab.EventAccept, applied, err)
}

// DeclineJob is the decline step (docs/protocol.md §4,
// dotlab.DeclineEffect) of the caller's open offer: the claim returns to
// the pool and the caller is not offered it again. Reason
// capability_mismatch costs nothing; any other reason, and none (""),
// counts against standing. Errors as AcceptJob's, and EINVALID (the
// reason).
func (s *Service) DeclineJob(ctx context.Context, agentID, claimID, reason string) (*dotlab.Job, error) {
	d, err := dotlab.DeclineEffect(reason)
	if err != nil {
		return nil, err
	}
	at := s.now()
	applied, err := s.Store.AddDecline(ctx, store.DeclineWrite{Write: store.Write{At: at}, ClaimID: claimID, AgentID: agentID,
		Transition: d.Transition, Reason: d.Reason})
	return s.offerTaken(ctx, agentID, claimID, at, dotlab.EventDecline, applied, err)
}

// offerTaken is the caller's job after an accept or decline (ev) that
// applied, or why it did not (offerProblem).
func (s *Service) offerTaken(ctx context.Context, agentID, claimID string, at time.Time, ev dotlab.Event, applied bool, err error) (*dotlab.Job, error) {
	if err != nil {
		return nil, err
	}
	if !applied {
		return nil, s.offerProblem(ctx, agentID, claimID, at, ev)
	}
	j, _, err := s.Store.LatestJob(ctx, claimID, agentID)
	return j, err
}

// offerProblem explains why an accept or decline (ev) of claimID by
// agentID did not apply: unknown claim (ENOTFOUND), not offered to the
// caller (ENOTOFFERED), the offer window closed (EWINDOWCLOSED), or done
// already (ECONFLICT).
func (s *Service) offerProblem(ctx context.Context, agentID, claimID string, now time.Time, ev dotlab.Event) error {
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return err
	}
	drawJob := dotlab.Go(dotlab.StepDrawJob, "")
	j, found, err := s.Store.LatestJob(ctx, claimID, agentID)
	if err != nil {
		return err
	}
	if !found {
		return dotlab.Errorf(dotlab.ENOTOFFERED, "job %s was not offered to you: fetch a job with %s", claimID, drawJob)
	}
	switch {
	case ev == dotlab.EventAccept && c.RunnerID == agentID && (c.State == dotlab.StateAssigned || c.State == dotlab.StateRunning):
		return dotlab.Errorf(dotlab.ECONFLICT, "job %s is already accepted by you: publish the run before %s", claimID, c.PublishDeadline.Format(time.RFC3339))
	case j.State == dotlab.JobOffered && !j.OfferExpiresAt.After(now), j.State == dotlab.JobExpired:
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the offer of %s expired at %s: fetch a new job with %s", claimID, j.OfferExpiresAt.Format(time.RFC3339), drawJob)
	case j.State == dotlab.JobDeclined:
		return dotlab.Errorf(dotlab.ECONFLICT, "you declined %s already: fetch a new job with %s", claimID, drawJob)
	}
	if _, err := c.Next(ev); err != nil {
		return err // the claim is past its offer
	}
	return dotlab.Errorf(dotlab.ENOTOFFERED, "job %s is not offered to you now (its state is %s): fetch a new job with %s", claimID, c.State, drawJob)
}

// firstDrawBatch and drawBatch are how many candidates the first step of
// the draw reads and how many each later step reads. The first is small:
// the first eligible candidate is nearly always won, and each candidate
// read costs two index probes (DrawCandidates' NOT EXISTS), so reading 32
// to offer one made the draw the dearest statement of a job cycle (2.5 ms
// of PostgreSQL's time against 0.2-0.5 ms for each other statement,
// bench/README.md, issue 25). The order of the candidates, and so the draw,
// is the same.
const (
	firstDrawBatch = 4
	drawBatch      = 32
)

// NextJob is the draw (docs/mechanism.md §1): a claim drawn at random
// among funded claims with no open offer, on which the caller holds no
// role, that it was never offered before, and whose `requires` its
// capabilities cover, offered for the accept window. The draw takes a
// uniform random point among the draw keys and the first eligible claim
// at or after it, wrapping around once. Two agents racing for one claim:
// the offer is a conditional write, so exactly one wins and the other
// moves on. An agent holds at most one open offer: while it has one,
// NextJob returns that same offer. found is false when nothing is
// offered.
func (s *Service) NextJob(ctx context.Context, agent *dotlab.Agent) (*dotlab.Job, bool, error) {
	now := s.now()
	if j, found, err := s.Store.OpenOffer(ctx, agent.ID, now); found || err != nil {
		return j, found, err
	}
	t, err := dotlab.Next(dotlab.StateFunded, dotlab.EventOffer)
	if err != nil {
		return nil, false, err
	}
	start := rand.Int64N(dotlab.DrawKeys)
	// Pass 1 walks [start, end); pass 2 wraps around to [0, start).
	var busy []string
	for _, r := range [][2]int64{{start, dotlab.DrawKeys}, {0, start}} {
		j, found, err := s.drawIn(ctx, agent, t, r[0], r[1], now, &busy)
		if found || err != nil {
			return j, found, err
		}
	}
	// Claims skipped because another transaction held their rows, in draw
	// order, now waited for: a free claim is never missed for a moment's
	// lock (docs/mechanism.md §1).
	for _, id := range busy {
		j, found, err := s.offer(ctx, agent, t, id, now, true)
		if found || err != nil {
			return j, found, err
		}
	}
	return nil, false, nil
}

// offer offers claimID to agent (store.AddOffer; wait: for a row another
// transaction holds, else store.ErrClaimBusy) and returns the job when it
// won, or the agent's own open offer when a concurrent draw of its won.
func (s *Service) offer(ctx context.Context, agent *dotlab.Agent, t dotlab.Transition, claimID string, now time.Time, wait bool) (*dotlab.Job, bool, error) {
	won, err := s.Store.AddOffer(ctx, store.OfferWrite{Write: store.Write{At: now}, ClaimID: claimID, AgentID: agent.ID, Transition: t,
		Expires: now.Add(s.Store.Windows().Accept), Wait: wait})
	if errors.Is(err, store.ErrOpenOffer) {
		// A concurrent draw by the same agent won: return that offer.
		return s.Store.OpenOffer(ctx, agent.ID, now)
	}
	if err != nil || !won {
		return nil, false, err
	}
	j, _, err := s.Store.LatestJob(ctx, claimID, agent.ID)
	return j, err == nil, err
}

// drawIn offers agent the first eligible claim with a draw key in [lo,
// hi) that it wins; claims skipped for a held row go to busy.
func (s *Service) drawIn(ctx context.Context, agent *dotlab.Agent, t dotlab.Transition, lo, hi int64, now time.Time, busy *[]string) (*dotlab.Job, bool, error) {
	for n := firstDrawBatch; ; n = drawBatch {
		cands, err := s.Store.DrawCandidates(ctx, agent.ID, lo, hi, n)
		if err != nil {
			return nil, false, err
		}
		for _, c := range cands {
			if !agent.Has(c.Requires) {
				continue
			}
			j, found, err := s.offer(ctx, agent, t, c.ClaimID, now, false)
			if errors.Is(err, store.ErrClaimBusy) {
				*busy = append(*busy, c.ClaimID)
				continue
			}
			if found || err != nil {
				return j, found, err
			}
		}
		if len(cands) < n {
			return nil, false, nil
		}
		lo = cands[len(cands)-1].Key + 1
	}
}
