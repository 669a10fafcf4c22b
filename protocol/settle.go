package protocol

import (
	"context"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// settleBatch bounds how many due changes one step of a sweep takes.
const settleBatch = 200

// Settle is the settlement clock's sweep (docs/mechanism.md §5): what is
// due at the store's current time. Ignored offers expire
// (dotlab.EventExpire: the claim returns to the pool), missed publish
// deadlines become abandoned jobs (dotlab.EventAbandon: the claim returns
// to the pool; the runner's standing falls), and claims whose challenge
// window closed without disagreement settle with the run's outcome
// (dotlab.EventWindowClose, logged). Each change is one conditional write
// (store.Writer.ApplyDue), so a sweep is idempotent and several server
// processes may sweep one database: exactly one applies each change.
// Whatever fell due while no server ran is done by the next sweep.
func (s *Service) Settle(ctx context.Context) (dotlab.SettleReport, error) {
	var rep dotlab.SettleReport
	now := s.now()
	steps := []struct {
		count *int
		event dotlab.Event
		from  dotlab.ClaimState // the sources lead to the same move
	}{
		{&rep.OffersExpired, dotlab.EventExpire, dotlab.StateFunded},
		{&rep.JobsAbandoned, dotlab.EventAbandon, dotlab.StateAssigned},
		{&rep.ClaimsSettled, dotlab.EventWindowClose, dotlab.StateChallengeWindow},
	}
	for _, st := range steps {
		t, err := dotlab.Next(st.from, st.event)
		if err != nil {
			return rep, err
		}
		for {
			ds, err := s.Store.Due(ctx, st.event, now, settleBatch)
			if err != nil {
				return rep, err
			}
			if err := s.applyDue(ctx, &rep, st.count, t, ds, now); err != nil {
				return rep, err
			}
			if len(ds) < settleBatch {
				break
			}
		}
	}
	if s.sealed() {
		return rep, s.settleSealed(ctx, &rep, now)
	}
	return rep, nil
}

// applyDue applies each due change ds by t, counting those applied in
// count and rep (with how late each committed after falling due).
func (s *Service) applyDue(ctx context.Context, rep *dotlab.SettleReport, count *int, t dotlab.Transition, ds []store.Due, now time.Time) error {
	for _, d := range ds {
		applied, err := s.Store.ApplyDue(ctx, dueWrite(t, d, now))
		if err != nil {
			return err
		}
		if applied {
			*count++
			rep.Changed = append(rep.Changed, d.ClaimID)
			rep.Lags = append(rep.Lags, dotlab.SettleLag{Event: t.Event, Late: max(s.Store.Now().Sub(d.At), 0)})
		}
	}
	return nil
}

// dueWrite is the write of due change d by t at now: the history it
// records and, for a closing window, the settlement with the run's
// outcome and its log entry.
func dueWrite(t dotlab.Transition, d store.Due, now time.Time) store.DueWrite {
	w := store.DueWrite{Write: store.Write{At: now}, Due: d, Transition: t}
	switch t.Event {
	case dotlab.EventAbandon:
		w.History = []string{"job abandoned by " + d.AgentID + " (publish deadline missed): back in the pool"}
	case dotlab.EventWindowClose:
		w.Outcome = d.Outcome
		w.History = []string{"challenge window closed without disagreement"}
		w.Log = []tlogfmt.Entry{tlogfmt.SettlementEntry(&dotlab.Claim{ID: d.ClaimID, Outcome: d.Outcome, RunID: d.RunID, SettledAt: &now})}
	}
	return w
}
