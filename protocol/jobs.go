package protocol

import (
	"context"
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
