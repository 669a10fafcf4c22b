package protocol_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
)

// The protocol's steps on a real SQLite store (a fake would miss what the
// conditional writes do), driven over the lifecycle table
// (dotlab.Transitions): every transition of a step the protocol owns is
// taken from its From state and must land in its To state, with the job's
// state the table gives; from every other state the step is refused with
// the code dotlab.Next gives.

var fast = dotlab.Windows{Accept: time.Minute, Publish: time.Minute, Challenge: time.Minute, Quorum: 1}

type world struct {
	t      *testing.T
	db     *sqlstore.DB
	svc    *protocol.Service
	clock  *sqlstoretest.Clock
	runner *dotlab.Agent
	n      int
}

func newWorld(t *testing.T) *world {
	clock := sqlstoretest.NewClock()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{Clock: clock, Windows: fast})
	w := &world{t: t, db: db, svc: sqlstoretest.Protocol(db), clock: clock}
	w.runner = w.agent("runner")
	return w
}

func (w *world) agent(name string) *dotlab.Agent {
	w.t.Helper()
	w.n++
	a, _, err := sqlstoretest.Protocol(w.db).CreateAgent(context.Background(), dotlab.NewAgent{Name: fmt.Sprintf("%s %d", name, w.n), Operator: "test operator"})
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

const disagreeing = "sd_diff: my rerun gives 1.2299 (dividing by n-1); the run's 1.17 differs by 0.0599"

// claimIn lists a claim and takes it to state with the protocol's steps
// (the runner's job accepted on the way, when the state has one).
func (w *world) claimIn(state dotlab.ClaimState) *dotlab.Claim {
	w.t.Helper()
	ctx := context.Background()
	sub := w.agent("submitter")
	c, err := sqlstoretest.Protocol(w.db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(w.t, fmt.Sprintf("claim %d in %s", w.n, state)))
	w.must(err)
	if state == dotlab.StateFunded {
		return c
	}
	j, found, err := sqlstoretest.Protocol(w.db).NextJob(ctx, w.runner)
	if err != nil || !found || j.ClaimID != c.ID {
		w.t.Fatalf("draw: %+v %v %v", j, found, err)
	}
	_, err = sqlstoretest.Protocol(w.db).AcceptJob(ctx, w.runner.ID, c.ID)
	w.must(err)
	switch state {
	case dotlab.StateRunning:
		_, err = w.svc.JoinLab(ctx, w.runner.ID, c.ID, dotlab.RoleRunner)
	case dotlab.StateChallengeWindow, dotlab.StateDisputed:
		_, err = w.svc.PublishRun(ctx, w.runner, sqlstoretest.RunBody(c.ID, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
	case dotlab.StateSettled:
		_, err = w.svc.PublishRun(ctx, w.runner, specIssue(c.ID), nil)
	}
	w.must(err)
	if state == dotlab.StateDisputed {
		_, err = w.svc.CreateChallenge(ctx, w.agent("first challenger"), w.challenge(c.ID, false), nil)
		w.must(err)
	}
	c, err = w.db.FindClaim(ctx, c.ID)
	w.must(err)
	if c.State != state {
		w.t.Fatalf("set up %s, got %s", state, c.State)
	}
	return c
}

func (w *world) challenge(claimID string, agrees bool) *dotlab.ChallengeBody {
	if agrees {
		return &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: claimID, Agrees: &agrees}
	}
	b := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced), ClaimID: claimID, Agrees: &agrees}
	b.Notes = disagreeing
	return b
}

// step takes event ev on claim c as the agent the protocol expects.
func (w *world) step(c *dotlab.Claim, ev dotlab.Event) error {
	ctx := context.Background()
	switch ev {
	case dotlab.EventExpire, dotlab.EventAbandon, dotlab.EventWindowClose:
		if ev == dotlab.EventExpire {
			if _, _, err := sqlstoretest.Protocol(w.db).NextJob(ctx, w.agent("candidate")); err != nil {
				w.t.Fatal(err)
			}
		}
		w.clock.Advance(time.Minute + time.Second) // past every window of fast
		rep, err := w.svc.Settle(ctx)
		if err == nil && len(rep.Changed) != 1 {
			w.t.Fatalf("%s: the sweep changed %v, want the one claim", ev, rep.Changed)
		}
		return err
	case dotlab.EventAccept, dotlab.EventDecline:
		a := w.agent("candidate")
		if _, _, err := sqlstoretest.Protocol(w.db).NextJob(ctx, a); err != nil {
			w.t.Fatal(err)
		}
		if ev == dotlab.EventAccept {
			_, err := w.svc.AcceptJob(ctx, a.ID, c.ID)
			return err
		}
		_, err := w.svc.DeclineJob(ctx, a.ID, c.ID, "capability_mismatch")
		return err
	case dotlab.EventJoinRunner:
		_, err := w.svc.JoinLab(ctx, w.runner.ID, c.ID, dotlab.RoleRunner)
		return err
	case dotlab.EventPublish:
		_, err := w.svc.PublishRun(ctx, w.runner, sqlstoretest.RunBody(c.ID, "1.58", "1.17", dotlab.OutcomeReproduced), nil)
		return err
	case dotlab.EventPublishFinal:
		_, err := w.svc.PublishRun(ctx, w.runner, specIssue(c.ID), nil)
		return err
	case dotlab.EventChallengeAgree, dotlab.EventChallengeDisagree:
		_, err := w.svc.CreateChallenge(ctx, w.agent("challenger"), w.challenge(c.ID, ev == dotlab.EventChallengeAgree), nil)
		return err
	case dotlab.EventQuorum:
		rev := w.agent("reviewer")
		if _, found, err := sqlstoretest.Protocol(w.db).NextDispute(ctx, rev.ID); err != nil || !found {
			w.t.Fatalf("no dispute drawn for the reviewer: %v", err)
		}
		_, err := w.svc.CastVote(ctx, rev, c.ID, dotlab.VoteBody{Vote: dotlab.VoteChallenger, Rationale: "sd_diff: the challenger's rerun divides by n-1 as the paper does"})
		return err
	}
	w.t.Fatalf("no step for %s", ev)
	return nil
}

// owned are the events whose step the protocol service takes (with a
// quorum of one, a vote is the quorum).
var owned = []dotlab.Event{dotlab.EventAccept, dotlab.EventDecline, dotlab.EventJoinRunner, dotlab.EventPublish, dotlab.EventPublishFinal, dotlab.EventChallengeAgree, dotlab.EventChallengeDisagree, dotlab.EventQuorum}

var reachable = []dotlab.ClaimState{dotlab.StateFunded, dotlab.StateAssigned, dotlab.StateRunning, dotlab.StateChallengeWindow, dotlab.StateDisputed, dotlab.StateSettled}

// clocked are the settlement clock's events (Service.Settle): nothing is
// refused, a sweep finds nothing due outside their sources.
var clocked = []dotlab.Event{dotlab.EventExpire, dotlab.EventAbandon, dotlab.EventWindowClose}

func TestStepsFollowTheLifecycleTable(t *testing.T) {
	taken := 0
	for _, tr := range dotlab.Transitions() {
		if !slices.Contains(owned, tr.Event) && !slices.Contains(clocked, tr.Event) {
			continue
		}
		t.Run(fmt.Sprintf("%s from %s", tr.Event, tr.From), func(t *testing.T) {
			w := newWorld(t)
			c := w.claimIn(tr.From)
			if err := w.step(c, tr.Event); err != nil {
				t.Fatal(err)
			}
			after, err := w.db.FindClaim(context.Background(), c.ID)
			w.must(err)
			if after.State != tr.To {
				t.Fatalf("%s from %s: state %s, want %s", tr.Event, tr.From, after.State, tr.To)
			}
			if tr.JobTo == dotlab.JobPublished {
				as, err := w.db.AgentActivity(context.Background(), w.runner.ID, 500)
				w.must(err)
				if !ranOn(as, c.ID) || after.RunID == "" {
					t.Fatalf("job after %s: no run of the runner's on %s (run_id %q)", tr.Event, c.ID, after.RunID)
				}
			}
		})
		taken++
	}
	if taken < len(owned)+len(clocked) {
		t.Fatalf("took %d transitions for %d events", taken, len(owned)+len(clocked))
	}
}

// ranOn reports whether the activity lists a run on claimID.
func ranOn(as []dotlab.Activity, claimID string) bool {
	for _, a := range as {
		if a.ClaimID == claimID && a.Kind == "run" {
			return true
		}
	}
	return false
}

// TestStepsRefusedOutsideTheirSources: from a state the table gives no
// move for, each step is refused with the code dotlab.Next names (the
// protocol's words), and the claim stays where it was.
func TestStepsRefusedOutsideTheirSources(t *testing.T) {
	for _, ev := range owned {
		for _, from := range reachable {
			if slices.Contains(dotlab.Sources(ev), from) {
				continue
			}
			if ev == dotlab.EventQuorum && from != dotlab.StateDisputed {
				continue // no dispute to draw a reviewer for: NextDispute finds none (a vote's refusals are below)
			}
			t.Run(fmt.Sprintf("%s from %s", ev, from), func(t *testing.T) {
				w := newWorld(t)
				c := w.claimIn(from)
				_, want := dotlab.Next(from, ev)
				err := w.step(c, ev)
				if want == nil || dotlab.ErrorCode(err) != dotlab.ErrorCode(want) {
					t.Fatalf("%s from %s: %v, want the refusal dotlab.Next names: %v", ev, from, err, want)
				}
				after, _ := w.db.FindClaim(context.Background(), c.ID)
				if after.State != from {
					t.Fatalf("refused %s moved the claim %s → %s", ev, from, after.State)
				}
			})
		}
	}
}

// specIssue is a spec_issue run of claimID (settled at once).
func specIssue(claimID string) *dotlab.RunBody {
	b := sqlstoretest.RunBody(claimID, "1.58", "1.17", dotlab.OutcomeSpecIssue)
	b.Notes = "the entrypoint names a file the code at the pinned commit does not have"
	return b
}
