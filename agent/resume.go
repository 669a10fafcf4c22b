package agent

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab"
)

// A runner that stopped after accepting a job (a crash, a restart, a rerun
// that failed on its side) still holds it until the publish deadline
// (docs/mechanism.md §2); the server hands it no new offer for it. So
// before drawing, the runner step takes up each job it holds that it has
// not tried in this process: assigned or running, with it as the runner,
// the deadline ahead.

// maxHeldPages bounds the claim pages read when looking for held jobs.
const maxHeldPages = 50

// held returns a job this agent holds and has not taken up in this
// process, with its manifest; ok is false when there is none. It reads the
// claims only on its first call in a process (jobs held from before it
// started) and while that scan found some: a job accepted by this process
// is marked taken at once.
func (a *Agent) held(ctx context.Context) (id string, m *dotlab.Manifest, ok bool, err error) {
	if a.heldDone {
		return "", nil, false, nil
	}
	if err := a.whoami(ctx); err != nil {
		return "", nil, false, err
	}
	now := a.now()
	for _, state := range []dotlab.ClaimState{dotlab.StateAssigned, dotlab.StateRunning} {
		after := ""
		for range maxHeldPages {
			page, err := a.Client.Claims(ctx, state, after, 200)
			if err != nil {
				return "", nil, false, err
			}
			for _, c := range page.Claims {
				if c.RunnerID != a.self || a.resumed[c.ID] || !dotlab.ValidClaimID(c.ID) ||
					c.PublishDeadline == nil || !c.PublishDeadline.After(now) {
					continue
				}
				a.taken(c.ID)
				m, err := a.fetchManifest(ctx, c.ID)
				if err != nil {
					return c.ID, nil, false, fmt.Errorf("%s: manifest: %w", c.ID, err)
				}
				a.logf("%s: taking up the job this agent accepted earlier (%s, publish by %s)", c.ID, state, c.PublishDeadline.Format("15:04:05"))
				return c.ID, m, true, nil
			}
			if page.Next == "" || page.Next <= after {
				break
			}
			after = page.Next
		}
	}
	a.heldDone = true
	return "", nil, false, nil
}

// whoami reads this agent's id once (GET /agents/me).
func (a *Agent) whoami(ctx context.Context) error {
	if a.self != "" {
		return nil
	}
	me, err := a.Client.Me(ctx)
	if err != nil {
		return err
	}
	a.self = me.ID
	return nil
}

// acceptedAnyway reports whether an accept the server refused as a
// conflict was in fact this agent's own, already applied: a retried
// request whose first try committed but lost its answer (a server killed or
// a proxy timeout). The claim then shows this agent as its runner.
func (a *Agent) acceptedAnyway(ctx context.Context, id string, err error) bool {
	if dotlab.ErrorCode(err) != dotlab.ECONFLICT || a.whoami(ctx) != nil {
		return false
	}
	c, cerr := a.Client.Claim(ctx, id)
	return cerr == nil && c.RunnerID == a.self && (c.State == dotlab.StateAssigned || c.State == dotlab.StateRunning)
}

// taken records that this process has taken up job id (accepted it, or
// resumed it), so held does not hand it out again.
func (a *Agent) taken(id string) {
	if a.resumed == nil {
		a.resumed = map[string]bool{}
	}
	a.resumed[id] = true
}
