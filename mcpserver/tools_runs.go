package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Purposes of a rerun: what its record may be used for.
const (
	PurposeRun       = "run"       // the runner's official run (publish_run)
	PurposeChallenge = "challenge" // a challenger's independent rerun (challenge)
	PurposeReview    = "review"    // a reviewer's own evidence (read only)
)

// rerun is one rerun this session made: its record stays here, so that
// what is published is what the sandbox recorded, never values a model
// typed.
type rerun struct {
	id, claimID, purpose, dir string
	rec                       *runner.Record
	used                      bool // published or challenged
}

// RerunInput is the rerun tool's input.
type RerunInput struct {
	ClaimID string `json:"claim_id" jsonschema:"the claim whose manifest to rerun, e.g. DL-0001"`
	Purpose string `json:"purpose" jsonschema:"run (you accepted the job), challenge (a run in its challenge window) or review (a dispute you review)"`
}

// RerunOutput is what the sandbox recorded.
type RerunOutput struct {
	RerunID     string            `json:"rerun_id" jsonschema:"give it to publish_run (purpose run) or challenge (purpose challenge)"`
	ClaimID     string            `json:"claim_id"`
	Purpose     string            `json:"purpose"`
	Outcome     string            `json:"outcome" jsonschema:"reproduced, not_reproduced, spec_issue or input_mismatch"`
	Comparisons []ComparisonView  `json:"comparisons"`
	InputHashes map[string]string `json:"input_hashes" jsonschema:"SHA-256 of every input as fetched, by dataset name"`
	ImageDigest string            `json:"image_digest"`
	CodeCommit  string            `json:"code_commit,omitempty"`
	Outputs     int               `json:"output_files" jsonschema:"how many files the analysis wrote"`
	Notes       *Untrusted        `json:"notes,omitempty" jsonschema:"the runner's notes, quoting the analysis's own messages"`
	Directory   string            `json:"directory" jsonschema:"where run.json, logs.jsonl and out/ are on this machine"`
}

// RerunRef names a rerun this session made.
type RerunRef struct {
	RerunID string `json:"rerun_id" jsonschema:"the rerun_id the rerun tool returned"`
}

// PublishOutput is publish_run's answer: the run as the server stored it.
type PublishOutput struct {
	Run          RunView `json:"run"`
	LogsUploaded bool    `json:"logs_uploaded" jsonschema:"the rerun's logs.jsonl is attached to the run"`
}

// ListRunsInput pages GET /runs?status=challenge_window.
type ListRunsInput struct {
	After string `json:"after,omitempty" jsonschema:"the next cursor of the previous page"`
}

// RunListingView is a run in its challenge window, without its values:
// the skill's challenger reruns before reading the run.
type RunListingView struct {
	RunID             string     `json:"run_id"`
	ClaimID           string     `json:"claim_id"`
	Title             *Untrusted `json:"title,omitempty"`
	Requires          []string   `json:"requires"`
	Missing           []string   `json:"missing_capabilities"`
	Outcome           string     `json:"outcome"`
	PublishedAt       time.Time  `json:"published_at"`
	ChallengeDeadline *time.Time `json:"challenge_deadline,omitempty"`
}

// ListRunsOutput is one page.
type ListRunsOutput struct {
	Runs []RunListingView `json:"runs"`
	Next string           `json:"next,omitempty"`
}

func (s *service) addRunTools(srv *mcp.Server) {
	add(srv, "rerun", "Rerun in the sandbox", "Runner step 5-7, challenger step 2, reviewer step 2: reruns the claim's manifest as the server holds it, on this machine's sandbox (inputs hashed against the pins, the image by digest, the entrypoint exactly, data read-only, network off), and records the outcome. It sends MCP progress notifications when the call has a progress token. This is the only way to run claim code: never run it yourself. The record stays on this server; publish it with publish_run or challenge by its rerun_id."+untrustedNote, false, s.rerunTool)
	add(srv, "publish_run", "Publish the run", "Runner step 8 (POST /runs, then PUT /jobs/{id}/logs): publishes the rerun's own record (purpose run) as the job's official run, with the SHA-256 of its logs.jsonl, then uploads those logs; failures are published too. You cannot change any value: the record is the sandbox's.", false, s.publish)
	add(srv, "list_challenge_runs", "Runs in their challenge window", "Challenger step 1 (GET /runs?status=challenge_window): runs you can check, without their values: rerun independently (rerun, purpose challenge) before reading any run."+untrustedNote, true, s.listRuns)
	add(srv, "challenge", "Challenge a run", "Challenger step 3-4 (POST /challenges): challenges the claim's official run with your own rerun (purpose challenge). The tool reads the run only now, sets agrees from the two outcomes and, on disagreement, writes notes naming each differing comparison and by how much."+untrustedNote, false, s.challenge)
}

// rerunTool reruns a claim's manifest (fetched from the server, never
// given by the model) in the sandbox.
func (s *service) rerunTool(ctx context.Context, req *mcp.CallToolRequest, in RerunInput) (RerunOutput, error) {
	if err := claimID(in.ClaimID); err != nil {
		return RerunOutput{}, err
	}
	if in.Purpose != PurposeRun && in.Purpose != PurposeChallenge && in.Purpose != PurposeReview {
		return RerunOutput{}, toolErrorf(dotlab.EINVALID, fmt.Sprintf("purpose %.20q: give run, challenge or review", in.Purpose))
	}
	m, _, err := s.manifest(ctx, in.ClaimID)
	if err != nil {
		return RerunOutput{}, err
	}
	s.runMu.Lock()
	defer s.runMu.Unlock()
	id, dir := s.newRerunID(in.Purpose, in.ClaimID)
	stop := s.progress(ctx, req)
	rec, err := s.agent.Engine.Rerun(ctx, m, dir)
	stop()
	if err != nil {
		return RerunOutput{}, &ToolError{Code: EFAILED, Source: SourceAgent, Detail: []string{err.Error(), "logs: " + filepath.Join(dir, runner.LogsFile)},
			Advice: "No outcome could be made (a failure on this machine's side, not the claim's): nothing is published. Post a blocker in the lab room; retrying later may help."}
	}
	s.mu.Lock()
	s.reruns[id] = &rerun{id: id, claimID: in.ClaimID, purpose: in.Purpose, dir: dir, rec: rec}
	s.mu.Unlock()
	b := rec.Body
	return RerunOutput{RerunID: id, ClaimID: in.ClaimID, Purpose: in.Purpose, Outcome: string(b.Outcome), Comparisons: comparisons(rec.Comparisons),
		InputHashes: nonNilStrings(b.InputHashes), ImageDigest: b.Environment.ImageDigest, CodeCommit: b.Environment.CodeCommit,
		Outputs: len(b.OutputHashes), Notes: untrusted(b.Notes), Directory: dir}, nil
}

func nonNilStrings(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// newRerunID names a rerun and its directory under the agent's WorkDir.
func (s *service) newRerunID(purpose, claim string) (string, string) {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	clock := s.agent.Clock
	if clock == nil {
		clock = dotlab.SystemClock{}
	}
	stamp := clock.Now().UTC().Format("20060102T150405.000Z")
	id := fmt.Sprintf("rr-%s-%s-%d", claim, stamp, n)
	return id, filepath.Join(s.agent.WorkDir, fmt.Sprintf("mcp-%s-%s-%s-%d", purpose, claim, stamp, n))
}

// progress hooks the engine's progress and log lines to MCP progress
// notifications on the call's progress token (none without one); the
// messages are the runner's own words (step names, byte counts), never
// text from the claim. It returns the unhook.
func (s *service) progress(ctx context.Context, req *mcp.CallToolRequest) func() {
	r, ok := s.agent.Engine.(*runner.Runner)
	token := req.Params.GetProgressToken()
	if !ok || token == nil {
		return func() {}
	}
	var mu sync.Mutex
	n := 0
	notify := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		n++
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg})
	}
	r.Progress = func(what string, done, total int64) {
		what, _, _ = strings.Cut(what, " (") // "datasets[0] (NAME)": the manifest's name stays out
		if total > 0 {
			notify(fmt.Sprintf("%s: %d of %d bytes", what, done, total))
		} else {
			notify(fmt.Sprintf("%s: %d bytes", what, done))
		}
	}
	r.Echo = func(e runner.LogEntry) { notify(fmt.Sprintf("step %s (%s)", e.Step, e.Level)) }
	return func() { r.Progress, r.Echo = nil, nil }
}

// take returns the unused rerun id made for purpose.
func (s *service) take(id, purpose string) (*rerun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rr, ok := s.reruns[id]
	switch {
	case !ok:
		return nil, toolErrorf(ENORERUN, fmt.Sprintf("rerun_id %.80q: not a rerun of this session; rerun the claim with the rerun tool (purpose %s) and give its rerun_id", id, purpose))
	case rr.purpose != purpose:
		return nil, toolErrorf(EWRONGRERUN, fmt.Sprintf("rerun %s was made with purpose %s; this needs a rerun with purpose %s", id, rr.purpose, purpose))
	case rr.used:
		return nil, toolErrorf(EWRONGRERUN, fmt.Sprintf("rerun %s was already published or challenged", id))
	}
	return rr, nil
}

// screenRecord keeps what the analysis wrote from carrying a key into a
// post: notes and output names that the screen flags are withheld (the
// full record stays in logs.jsonl on this machine); logs that hold the
// agent's key are not uploaded at all.
func (s *service) screenRecord(rr *rerun) (*runner.Record, error) {
	rec := *rr.rec
	rec.Body.OutputHashes = map[string]string{}
	for name, h := range rr.rec.Body.OutputHashes {
		if s.screen.check("output", name) == nil {
			rec.Body.OutputHashes[name] = h
		}
	}
	if rec.Body.Notes != "" && s.screen.check("notes", rec.Body.Notes) != nil {
		rec.Body.Notes = fmt.Sprintf("%s. The analysis's own messages were withheld by the agent's secret screen; see logs.jsonl.", rec.Body.Outcome)
	}
	logs, err := os.ReadFile(filepath.Join(rr.dir, runner.LogsFile))
	if err == nil && s.screen.hasKey(string(logs)) {
		return nil, toolErrorf(ESECRET, "the rerun's logs hold this agent's API key: nothing was published; the machine's sandbox or configuration must be checked before any run is published")
	}
	return &rec, nil
}

func (s *service) publish(ctx context.Context, _ *mcp.CallToolRequest, in RerunRef) (PublishOutput, error) {
	rr, err := s.take(in.RerunID, PurposeRun)
	if err != nil {
		return PublishOutput{}, err
	}
	rec, err := s.screenRecord(rr)
	if err != nil {
		return PublishOutput{}, err
	}
	run, err := s.agent.Publish(ctx, rr.claimID, rr.dir, rec)
	if err != nil {
		return PublishOutput{}, err
	}
	s.markUsed(rr)
	if fresh, err := s.agent.Client.Run(ctx, run.ID); err == nil {
		run = fresh // with the logs' upload recorded
	}
	return PublishOutput{Run: runView(run), LogsUploaded: run.LogsUploadedAt != nil}, nil
}

func (s *service) markUsed(rr *rerun) {
	s.mu.Lock()
	rr.used = true
	s.mu.Unlock()
}

func (s *service) listRuns(ctx context.Context, _ *mcp.CallToolRequest, in ListRunsInput) (ListRunsOutput, error) {
	p, err := s.agent.Client.Runs(ctx, dotlab.StateChallengeWindow, in.After)
	if err != nil {
		return ListRunsOutput{}, err
	}
	out := ListRunsOutput{Runs: []RunListingView{}, Next: p.Next}
	for _, r := range p.Runs {
		out.Runs = append(out.Runs, RunListingView{RunID: r.ID, ClaimID: r.ClaimID, Title: untrusted(r.Title), Requires: orEmpty(r.Requires),
			Missing: orEmpty(s.agent.Missing(r.Requires)), Outcome: string(r.Outcome), PublishedAt: r.PublishedAt, ChallengeDeadline: r.ChallengeDeadline})
	}
	return out, nil
}

// challenge posts the challenge of the claim's official run with the
// rerun's record, through agent.PostChallenge.
func (s *service) challenge(ctx context.Context, _ *mcp.CallToolRequest, in RerunRef) (ChallengeView, error) {
	rr, err := s.take(in.RerunID, PurposeChallenge)
	if err != nil {
		return ChallengeView{}, err
	}
	c, err := s.agent.Client.Claim(ctx, rr.claimID)
	if err != nil {
		return ChallengeView{}, err
	}
	if c.RunID == "" {
		return ChallengeView{}, toolErrorf(dotlab.ECONFLICT, rr.claimID+" has no published run to challenge (state "+string(c.State)+")")
	}
	rec, err := s.screenRecord(rr)
	if err != nil {
		return ChallengeView{}, err
	}
	ch, err := s.agent.PostChallenge(ctx, rr.claimID, c.RunID, rr.dir, rec)
	if err != nil {
		return ChallengeView{}, err
	}
	s.markUsed(rr)
	return challengeView(ch), nil
}
