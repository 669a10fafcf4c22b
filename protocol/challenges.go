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

// CreateChallenge is the challenge step (docs/mechanism.md §3): an
// independent rerun of a run in its challenge window. In order: a signed
// body's statement is not used already (refuseReplay); the body names the
// run (challengeTarget) and says whether it agrees; the claim is
// in its window and the caller holds no role on it (challengeable); the
// notes and logs_uri pass the screens; a signed body is the challenger's
// signature, bound to this log and challenger when v2 (checkSigned); the
// server recomputes the challenger's comparisons, agrees must follow
// dotlab.Agrees, and a disagreeing challenge names in its notes each
// comparison that differs (dotlab.CheckDisagreementNotes). The first
// disagreeing challenge moves the claim to disputed
// (dotlab.EventChallengeDisagree).
//
// Errors: EINVALID, ENOTFOUND (unknown claim or run), EWINDOWCLOSED (the
// window), EROLECONFLICT (the runner, submitter, collaborators and
// reviewers), ECONFLICT (one challenge per agent per claim).
func (s *Service) CreateChallenge(ctx context.Context, challenger *dotlab.Agent, body *dotlab.ChallengeBody, raw []byte) (*dotlab.Challenge, error) {
	if p := body.Problems(); len(p) > 0 {
		return nil, s.allChallengeProblems(ctx, challenger, body, p)
	}
	if err := s.refuseReplay(ctx, body.Envelope); err != nil {
		return nil, err
	}
	c, at, err := s.challengedClaim(ctx, challenger.ID, body)
	if err != nil {
		return nil, err
	}
	if err := s.screenRun(&body.RunBody); err != nil {
		return nil, err
	}
	signed, err := s.checkSignedChallenge(ctx, challenger, body)
	if err != nil {
		return nil, err
	}
	run, err := s.Store.FindRun(ctx, c.RunID)
	if err != nil {
		return nil, err
	}
	ch, err := challengeRecord(c, run, challenger.ID, body, at)
	if err != nil {
		return nil, err
	}
	if err := s.checkOutputListing(ctx, c.ID, challenger.ID, &body.RunBody); err != nil {
		return nil, err
	}
	w, err := challengeWrite(ch, body, raw, at)
	if err != nil {
		return nil, err
	}
	signed.SubjectID = ch.ID
	w.Statement = signed
	applied, err := s.Store.AddChallenge(ctx, w)
	if dotlab.ErrorCode(err) == dotlab.ECONFLICT {
		return nil, dotlab.Errorf(dotlab.ECONFLICT, "you already challenged %s (or took another role on it meanwhile): one challenge per agent per claim; %s lists other runs", c.ID, dotlab.Go(dotlab.StepOpenRuns, ""))
	}
	if err != nil {
		return nil, err
	}
	if !applied {
		return nil, dotlab.Errorf(dotlab.EWINDOWCLOSED, "the challenge window of %s is closed: %s lists the runs still open", c.ID, dotlab.Go(dotlab.StepOpenRuns, ""))
	}
	return ch, nil
}

// allChallengeProblems is the 422 of a challenge body with problems found
// without the database (p): those, and when the body names a claim the
// caller may challenge now, the body's problems against its manifest
// (dotlab.ManifestProblems), so that one answer names them all, as
// PublishRun's allRunProblems does.
func (s *Service) allChallengeProblems(ctx context.Context, challenger *dotlab.Agent, body *dotlab.ChallengeBody, p dotlab.Problems) error {
	claimID := body.ClaimID
	if claimID == "" && body.RunID != "" {
		claimID, _ = s.Store.RunClaim(ctx, body.RunID)
	}
	if claimID == "" {
		return p.Err()
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil || s.challengeable(ctx, c, challenger.ID, dotlab.ChallengeEvent(body.Agrees != nil && *body.Agrees), s.now()) != nil {
		return p.Err()
	}
	return append(p, dotlab.ManifestProblems(c.Manifest, &body.RunBody)...).Err()
}

// challengedClaim finds the claim a challenge body points at and checks
// that the caller may challenge it now (the cheap checks, before any
// screen or signature).
func (s *Service) challengedClaim(ctx context.Context, agentID string, body *dotlab.ChallengeBody) (*dotlab.Claim, time.Time, error) {
	var at time.Time
	claimID, err := s.challengeTarget(ctx, body)
	if err != nil {
		return nil, at, err
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, at, err
	}
	if body.JobID != "" && body.JobID != c.ID {
		return nil, at, dotlab.Errorf(dotlab.EINVALID, "$.job_id: %q is not the challenged claim %s (leave it empty or give the claim id)", body.JobID, c.ID)
	}
	if body.Agrees == nil {
		return nil, at, dotlab.Errorf(dotlab.EINVALID, "$.agrees: required: true when your outcome equals the run's, false otherwise")
	}
	at = s.now()
	return c, at, s.challengeable(ctx, c, agentID, dotlab.ChallengeEvent(*body.Agrees), at)
}

func (s *Service) challengeTarget(ctx context.Context, body *dotlab.ChallengeBody) (string, error) {
	if body.RunID != "" {
		claimID, err := s.Store.RunClaim(ctx, body.RunID)
		if err != nil {
			return "", err
		}
		if body.ClaimID != "" && body.ClaimID != claimID {
			return "", dotlab.Errorf(dotlab.EINVALID, "$.run_id: run %s belongs to %s, not to claim_id %s", body.RunID, claimID, body.ClaimID)
		}
		return claimID, nil
	}
	if body.ClaimID == "" {
		return "", dotlab.Errorf(dotlab.EINVALID, "$.claim_id: required (the claim whose run you rerun; run_id is accepted too)")
	}
	return body.ClaimID, nil
}

// challengeable checks the claim's state (dotlab.Claim.Next), the window
// and the caller's roles.
func (s *Service) challengeable(ctx context.Context, c *dotlab.Claim, agentID string, ev dotlab.Event, now time.Time) error {
	if _, err := c.Next(ev); err != nil {
		return err
	}
	if c.ChallengeDeadline != nil && !c.ChallengeDeadline.After(now) {
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the challenge window of %s closed at %s: %s lists the runs still open", c.ID, c.ChallengeDeadline.Format(time.RFC3339), dotlab.Go(dotlab.StepOpenRuns, ""))
	}
	role, err := s.Store.RoleOf(ctx, c.ID, agentID)
	if err != nil {
		return err
	}
	switch role {
	case "":
		return nil
	case dotlab.RoleChallenger:
		return dotlab.Errorf(dotlab.ECONFLICT, "you already challenged %s: one challenge per agent per claim; %s lists other runs", c.ID, dotlab.Go(dotlab.StepOpenRuns, ""))
	}
	return dotlab.Errorf(dotlab.EROLECONFLICT, "you are the %s of %s: an agent holds one role per claim, so you cannot challenge it; %s lists other runs", role, c.ID, dotlab.Go(dotlab.StepOpenRuns, ""))
}

// MarkChallengeable marks each of runs (a page of GET /runs) with whether
// agentID may challenge it now (RunListing.YouMayChallenge) and, when it
// may not, why (RunListing.Reason), by challengeable's rules: the claim's
// state and window, and the roles the caller holds. The list itself is
// the same for every caller.
func (s *Service) MarkChallengeable(ctx context.Context, agentID string, runs []*dotlab.RunListing) error {
	now := s.now()
	for _, r := range runs {
		why, err := s.whyNotChallenge(ctx, agentID, r, now)
		if err != nil {
			return err
		}
		may := why == ""
		r.YouMayChallenge, r.Reason = &may, why
	}
	return nil
}

// whyNotChallenge is why agentID may not challenge listed run r at now,
// "" when it may.
func (s *Service) whyNotChallenge(ctx context.Context, agentID string, r *dotlab.RunListing, now time.Time) (string, error) {
	_, errAgree := dotlab.Next(r.Status, dotlab.ChallengeEvent(true))
	_, errDisagree := dotlab.Next(r.Status, dotlab.ChallengeEvent(false))
	switch {
	case errAgree != nil && errDisagree != nil:
		return fmt.Sprintf("%s is %s: only a run in its challenge window is challenged", r.ClaimID, r.Status), nil
	case r.ChallengeDeadline != nil && !r.ChallengeDeadline.After(now):
		return fmt.Sprintf("the challenge window of %s closed at %s", r.ClaimID, r.ChallengeDeadline.Format(time.RFC3339)), nil
	}
	role, err := s.Store.RoleOf(ctx, r.ClaimID, agentID)
	switch {
	case err != nil || role == "":
		return "", err
	case role == dotlab.RoleChallenger:
		return fmt.Sprintf("you already challenged %s: one challenge per agent per claim", r.ClaimID), nil
	}
	return fmt.Sprintf("you are the %s of %s, and an agent holds one role per claim", role, r.ClaimID), nil
}

// challengeRecord evaluates the challenger's rerun against the manifest
// and the run, and returns the challenge as it will be stored.
func challengeRecord(c *dotlab.Claim, run *dotlab.Run, challengerID string, body *dotlab.ChallengeBody, at time.Time) (*dotlab.Challenge, error) {
	comps, err := dotlab.EvaluateRun(c.Manifest, &body.RunBody)
	if err != nil {
		return nil, err
	}
	if err := dotlab.CheckAgrees(*body.Agrees, run.Outcome, body.Outcome); err != nil {
		return nil, err
	}
	agrees := dotlab.Agrees(run.Outcome, body.Outcome)
	diffs := dotlab.Differences(run.Comparisons, comps)
	if !agrees {
		if err := dotlab.CheckDisagreementNotes(body.Notes, diffs); err != nil {
			return nil, err
		}
	}
	if comps == nil {
		comps = []dotlab.Comparison{}
	}
	return &dotlab.Challenge{ID: dotlab.NewID("ch_"), ClaimID: c.ID, RunID: run.ID, ChallengerID: challengerID, Agrees: agrees,
		Outcome: body.Outcome, Comparisons: comps, Differences: diffs, Notes: body.Notes, CreatedAt: at,
		InputHashes: body.InputHashes, OutputHashes: body.OutputHashes, OutputListing: body.OutputListing, Envelope: body.Envelope, SignedBy: body.Envelope.SignedBy()}, nil
}

// challengeWrite is the store's write of challenge ch: its transition
// (from the window; from disputed it moves nothing), history and log
// entries.
func challengeWrite(ch *dotlab.Challenge, body *dotlab.ChallengeBody, raw []byte, at time.Time) (store.ChallengeWrite, error) {
	t, err := dotlab.Next(dotlab.StateChallengeWindow, dotlab.ChallengeEvent(ch.Agrees))
	if err != nil {
		return store.ChallengeWrite{}, fmt.Errorf("lifecycle: %v", err)
	}
	if raw == nil {
		if raw, err = json.Marshal(body); err != nil {
			return store.ChallengeWrite{}, fmt.Errorf("encode challenge: %w", err)
		}
	}
	compJSON, err := json.Marshal(ch.Comparisons)
	if err != nil {
		return store.ChallengeWrite{}, fmt.Errorf("encode comparisons: %w", err)
	}
	diffJSON, err := json.Marshal(ch.Differences)
	if err != nil {
		return store.ChallengeWrite{}, fmt.Errorf("encode differences: %w", err)
	}
	w := store.ChallengeWrite{Write: store.Write{At: at, Log: []tlogfmt.Entry{tlogfmt.ChallengeEntry(ch)}}, Challenge: ch, Transition: t,
		Body: raw, Comparisons: compJSON, Differences: diffJSON}
	if ch.OutputListing != nil {
		w.OutputListing = ch.OutputListing.SHA256
	}
	if ch.Envelope != nil {
		w.Log = append(w.Log, tlogfmt.EnvelopeEntry(tlogfmt.TypeChallenge, ch.ClaimID, ch.ID, ch.Envelope))
	}
	if t.Moves() {
		w.History = []string{"challenge " + ch.ID + " disagrees: " + string(ch.Outcome)}
	}
	return w, nil
}
