package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// PublishRun is the publish step (docs/protocol.md §6,
// dotlab.PublishEvent): the official run of runner's job. In order: the
// body names its job; a signed body's statement is not used already
// (refuseReplay); the caller is the claim's runner, the claim's state
// allows publishing and the publish deadline holds (publishable); the
// notes and logs_uri pass the screens; a signed body is runner's signature,
// bound to this log and runner when v2 (checkSigned);
// the body passes dotlab.EvaluateRun against the manifest. Then the store
// moves the claim — reproduced and not_reproduced open the challenge
// window, spec_issue and input_mismatch settle at once — and logs the run
// (its envelope, and the settlement of a final outcome). raw is the body
// exactly as submitted (stored byte for byte); nil re-encodes body.
//
// Errors: EINVALID (no job_id, a replayed envelope, the screens, the
// signature and its binding, the body),
// ENOTFOUND (unknown claim), ENOTOFFERED (not the assigned runner),
// ECONFLICT (already published, or changed while publishing),
// EWINDOWCLOSED (deadline passed), EOUTCOMEMISMATCH (the body's outcome).
func (s *Service) PublishRun(ctx context.Context, runner *dotlab.Agent, body *dotlab.RunBody, raw []byte) (*dotlab.Run, error) {
	if p := body.Problems(); len(p) > 0 {
		return nil, s.allRunProblems(ctx, runner, body, p)
	}
	if err := s.refuseReplay(ctx, body.Envelope); err != nil {
		return nil, err
	}
	c, err := s.findClaim(ctx, body.JobID)
	if err != nil {
		return nil, err
	}
	at := s.now()
	if err := s.mayPublish(ctx, c, runner.ID, body.Outcome, at); err != nil {
		return nil, err
	}
	if err := s.screenRun(body); err != nil {
		return nil, err
	}
	signed, err := s.checkSignedRun(ctx, runner, body)
	if err != nil {
		return nil, err
	}
	comps, err := dotlab.EvaluateRun(c.Manifest, body)
	if err != nil {
		return nil, err
	}
	if err := s.checkOutputListing(ctx, c.ID, runner.ID, body); err != nil {
		return nil, err
	}
	w, err := runWrite(c, runner.ID, body, raw, comps, at, s.Store.Windows().Challenge)
	if err != nil {
		return nil, err
	}
	signed.SubjectID = w.RunID
	w.Statement = signed
	applied, err := s.Store.AddRun(ctx, w)
	if err != nil {
		return nil, err
	}
	if !applied {
		// Lost a race (deadline, or a concurrent publish): explain from fresh state.
		c, err := s.findClaim(ctx, body.JobID)
		if err != nil {
			return nil, err
		}
		if err := s.mayPublish(ctx, c, runner.ID, body.Outcome, s.now()); err != nil {
			return nil, err
		}
		return nil, dotlab.Errorf(dotlab.ECONFLICT, "%s changed while publishing: fetch it (%s) and retry", body.JobID, dotlab.Go(dotlab.StepClaim, body.JobID))
	}
	return s.Store.FindRun(ctx, w.RunID)
}

// allRunProblems is the 422 of a run body with problems found without the
// database (p): those, and when the body names a claim the caller may
// publish on, the body's problems against its manifest
// (dotlab.ManifestProblems), so that one answer names them all. The
// claim's own refusals (unknown, not the caller's, closed) leave the 422
// with p: the body is checked before the database is asked.
func (s *Service) allRunProblems(ctx context.Context, runner *dotlab.Agent, body *dotlab.RunBody, p dotlab.Problems) error {
	if body.JobID == "" {
		return p.Err()
	}
	c, err := s.findClaim(ctx, body.JobID)
	if err != nil || s.mayPublish(ctx, c, runner.ID, dotlab.OutcomeReproduced, s.now()) != nil {
		return p.Err()
	}
	return append(p, dotlab.ManifestProblems(c.Manifest, body)...).Err()
}

// runWrite is the store's write of run body on claim c at time at: the
// transition of its outcome, the history, and the log entries of the run as
// the read path will return it (its envelope, and the settlement of a final
// outcome).
func runWrite(c *dotlab.Claim, runnerID string, body *dotlab.RunBody, raw []byte, comps []dotlab.Comparison, at time.Time, window time.Duration) (store.RunWrite, error) {
	t, err := c.Next(dotlab.PublishEvent(body.Outcome))
	if err != nil {
		return store.RunWrite{}, err
	}
	if raw == nil {
		if raw, err = json.Marshal(body); err != nil {
			return store.RunWrite{}, fmt.Errorf("encode run: %w", err)
		}
	}
	compJSON, err := json.Marshal(comps)
	if err != nil {
		return store.RunWrite{}, fmt.Errorf("encode comparisons: %w", err)
	}
	run := &dotlab.Run{ID: dotlab.NewID("run_"), ClaimID: c.ID, RunnerID: runnerID, Outcome: body.Outcome, LogsSHA256: body.LogsSHA256,
		Body: *body, Comparisons: comps, PublishedAt: at}
	w := store.RunWrite{Write: store.Write{At: at}, ClaimID: c.ID, RunnerID: runnerID, RunID: run.ID, Transition: t, Outcome: body.Outcome,
		Body: raw, Comparisons: compJSON, LogsSHA256: body.LogsSHA256}
	if body.OutputListing != nil {
		w.OutputListing = body.OutputListing.SHA256
	}
	w.Log = append(w.Log, tlogfmt.RunEntry(run))
	if body.Envelope != nil {
		w.Log = append(w.Log, tlogfmt.EnvelopeEntry(tlogfmt.TypeRun, c.ID, run.ID, body.Envelope))
	}
	then := "challenge window open"
	if t.Event == dotlab.EventPublishFinal {
		then = "settled at once: " + string(body.Outcome)
		w.Log = append(w.Log, tlogfmt.SettlementEntry(&dotlab.Claim{ID: c.ID, Outcome: body.Outcome, RunID: run.ID, SettledAt: &at}))
	} else {
		w.ChallengeDeadline = at.Add(window)
	}
	w.History = []string{"run " + run.ID + " published: " + string(body.Outcome), then}
	return w, nil
}

// mayPublish checks that agentID is the claim's runner (notYourJob says
// why not), that the claim's state allows publishing (dotlab.Claim.Next)
// and that the deadline holds.
func (s *Service) mayPublish(ctx context.Context, c *dotlab.Claim, agentID string, outcome dotlab.Outcome, now time.Time) error {
	if c.RunnerID != agentID || c.State == dotlab.StateFunded {
		return s.notYourJob(ctx, c, agentID)
	}
	if _, err := c.Next(dotlab.PublishEvent(outcome)); err != nil {
		return err
	}
	if c.PublishDeadline != nil && !c.PublishDeadline.After(now) {
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the publish deadline of %s passed at %s, so the job is abandoned: take another with %s", c.ID, c.PublishDeadline.Format(time.RFC3339), dotlab.Go(dotlab.StepDrawJob, ""))
	}
	return nil
}

// MayPublishRun is PublishRun's role check alone, for the HTTP edge to
// make before it decodes a large run body (docs/threat-model.md "The public
// edge": who before size and shape): nil when agentID is claimID's runner
// now, else PublishRun's own refusal (ENOTFOUND for an unknown claim,
// ENOTOFFERED from notYourJob). State and deadline are PublishRun's.
func (s *Service) MayPublishRun(ctx context.Context, agentID, claimID string) error {
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return err
	}
	if c.RunnerID != agentID || c.State == dotlab.StateFunded {
		return s.notYourJob(ctx, c, agentID)
	}
	return nil
}

// notYourJob is the ENOTOFFERED (409) answer to agentID publishing on c
// when it is not c's runner now, from its latest job on c: offered and not
// accepted yet (accept first, POST /jobs/{id}/accept); abandoned (its
// publish deadline passed, the job went back to the pool); else not
// assigned to it.
func (s *Service) notYourJob(ctx context.Context, c *dotlab.Claim, agentID string) error {
	j, found, err := s.Store.LatestJob(ctx, c.ID, agentID)
	if err != nil {
		return err
	}
	switch {
	case found && j.State == dotlab.JobOffered && c.RunnerID == agentID:
		return dotlab.Errorf(dotlab.ENOTOFFERED, "job %s is offered to you but not accepted yet: accept it first (%s), then publish the run within the publish window", c.ID, dotlab.Go(dotlab.StepAccept, c.ID))
	case found && j.State == dotlab.JobAbandoned:
		deadline := "its publish deadline"
		if j.PublishDeadline != nil {
			deadline += " (" + j.PublishDeadline.Format(time.RFC3339) + ")"
		}
		return dotlab.Errorf(dotlab.ENOTOFFERED, "your job %s was abandoned: %s passed before you published, so it went back to the pool and no run of yours is taken for it; take another with %s", c.ID, deadline, dotlab.Go(dotlab.StepDrawJob, ""))
	}
	return dotlab.Errorf(dotlab.ENOTOFFERED, "job %s is not assigned to you: only the assigned runner publishes the official run; take a job of your own with %s", c.ID, dotlab.Go(dotlab.StepDrawJob, ""))
}
