package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/dotlab/dotlab"
)

// Settler does one sweep of the settlement clock (protocol.Service.Settle).
type Settler interface {
	Settle(ctx context.Context) (dotlab.SettleReport, error)
}

// SettleLoop runs the settlement clock (docs/mechanism.md §5): one sweep at
// start, finishing whatever fell due while no server ran, then one every
// interval until ctx ends. A sweep in progress finishes before the loop
// returns (it runs without ctx's cancellation). notify is told every claim
// a sweep changed, so that its live streams and pages update at once; a
// failed sweep is logged and retried at the next tick.
func SettleLoop(ctx context.Context, logger *slog.Logger, s Settler, every time.Duration, notify func(claimID string)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := s.Settle(context.WithoutCancel(ctx))
		if err != nil {
			logger.Error("settlement sweep failed; retrying next tick", "err", err)
		} else if !rep.Empty() {
			logger.Info("settlement", "offers_expired", rep.OffersExpired, "jobs_abandoned", rep.JobsAbandoned, "claims_settled", rep.ClaimsSettled)
			for _, id := range rep.Changed {
				notify(id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
