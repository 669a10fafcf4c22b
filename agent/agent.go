// Package agent is the agent side of the protocol against a server: the
// runner loop (draw → accept → lab room → rerun → publish → logs), the
// challenger (independent rerun of runs in their challenge window) and the
// reviewer (evidence, optional local rerun, vote), each a Step that Loop
// repeats; and the credentials file of registered agents. The commands
// `dotlab runner`, `dotlab challenger` and `dotlab review` and the demo use
// the same steps and the same Loop.
//
// The calls, roles and windows are those of docs/protocol.md (§2 Roles,
// §4 Who may call what, §6 Run body, §7 Challenge body, §8 Votes and lab
// rooms) and docs/mechanism.md (§1 the draw, §3 challenges, §4 disputes).
// The package links no server code: it talks to a server through client.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/verify"
)

// Engine reruns a manifest into outDir (runner.Runner implements it).
type Engine interface {
	Rerun(ctx context.Context, m *dotlab.Manifest, outDir string) (*runner.Record, error)
}

// Agent is one registered agent with a rerun engine.
type Agent struct {
	Client *client.Client
	Engine Engine
	// Capabilities are what this agent can actually provide (e.g. python,
	// r, gpu). A drawn claim requiring more is declined with
	// capability_mismatch (free of cost).
	Capabilities []string
	// WorkDir holds one directory per rerun (run.json, logs.jsonl, out/).
	WorkDir string
	// Logf reports progress to the operator (may be nil).
	Logf func(format string, args ...any)
	// Clock names work directories.
	Clock dotlab.Clock
	// Key, when set, signs every run, challenge and vote the agent posts
	// (docs/verification.md "Signed records"); nil posts them unsigned.
	Key *attest.Key

	// Voter, when set, casts Review's votes instead of CastVote (e.g.
	// CommitVote under sealed votes).
	Voter func(ctx context.Context, disputeID, vote, rationale string) (*dotlab.Dispute, error)

	// Witness, when set, checks the server's log after each step that did
	// work and keeps its last checkpoint (KeepCheckpoints).
	Witness *verify.Witness

	bindMu sync.Mutex      // guards bind (jobs publish from several goroutines)
	bind   *attest.Binding // what this agent's statements name, once read (binding)

	tried    map[string]bool // claims the challenger already looked at
	resumed  map[string]bool // held jobs the runner took up in this process (held)
	self     string          // this agent's id, once read (whoami)
	heldDone bool            // held found no more jobs held from before this process
}

func (a *Agent) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// workDir names a directory for one rerun. claimID comes from the server and
// must be a claim id (DL-0001); callers check it with dotlab.ValidClaimID.
func (a *Agent) workDir(kind, claimID string) string {
	if !dotlab.ValidClaimID(claimID) {
		claimID = "invalid-id"
	}
	return filepath.Join(a.WorkDir, fmt.Sprintf("%s-%s-%s", kind, claimID, a.now().UTC().Format("20060102T150405.000Z")))
}

// now is the agent's clock (dotlab.SystemClock when none is set).
func (a *Agent) now() time.Time {
	if a.Clock == nil {
		return dotlab.SystemClock{}.Now()
	}
	return a.Clock.Now()
}

// fetchManifest reads a claim's manifest as submitted and validates it.
func (a *Agent) fetchManifest(ctx context.Context, claimID string) (*dotlab.Manifest, error) {
	raw, err := a.Client.ClaimManifest(ctx, claimID)
	if err != nil {
		return nil, err
	}
	return manifest.Parse(raw)
}

// Missing lists the capabilities of req (a manifest's requires) that the
// agent lacks: a claim needing any of them is declined with
// capability_mismatch (docs/mechanism.md §1).
func (a *Agent) Missing(req []string) []string {
	have := map[string]bool{}
	for _, c := range a.Capabilities {
		have[c] = true
	}
	var out []string
	for _, r := range req {
		if !have[r] {
			out = append(out, r)
		}
	}
	return out
}

// post writes to a claim's room, logging (not failing) when the room refuses.
func (a *Agent) post(ctx context.Context, claimID, typ, body string, refs ...string) {
	if _, err := a.Client.Post(ctx, claimID, dotlab.LabMessageBody{Type: typ, To: "all", Body: body, Refs: refs}); err != nil {
		a.logf("%s: room refused a %s: %v", claimID, typ, err)
	}
}

// RunOnce takes at most one job: it returns the claim it worked on, or ""
// when the server had none (204). A job whose rerun could make no outcome
// (sandbox or network failure) is reported as a blocker in the room and
// returned as an error; it is not published.
func (a *Agent) RunOnce(ctx context.Context) (string, error) {
	id, m, err := a.take(ctx)
	if m == nil || err != nil {
		return id, err
	}
	return id, a.work(ctx, id, m)
}

// take draws at most one job and settles the offer: declined
// (capability_mismatch, free of cost) or accepted. It returns the claim
// ("" when the server had none) and, for an accepted job only, its
// manifest. While take runs, the agent holds at most one open offer, which
// the server hands back on every draw until it is accepted or declined;
// so draws by one agent must not overlap (RunLoop makes them one at a
// time).
func (a *Agent) take(ctx context.Context) (string, *dotlab.Manifest, error) {
	if id, m, ok, err := a.held(ctx); ok {
		return id, m, nil
	} else if err != nil {
		a.logf("could not look for jobs this agent holds (drawing a new one): %v", err)
	}
	job, err := a.Client.NextJob(ctx)
	if errors.Is(err, client.ErrNone) {
		return "", nil, nil
	} else if err != nil {
		return "", nil, err
	}
	id := job.ClaimID
	if !dotlab.ValidClaimID(id) {
		return "", nil, fmt.Errorf("the server offered job %.40q, which is not a claim id: refusing it", id)
	}
	m, err := a.fetchManifest(ctx, id)
	if err != nil {
		return id, nil, fmt.Errorf("%s: manifest: %w", id, err)
	}
	if miss := a.Missing(m.Requires); len(miss) > 0 {
		a.logf("%s: declining (capability_mismatch): needs %s", id, strings.Join(miss, ", "))
		_, err := a.Client.Decline(ctx, id, dotlab.DeclineCapabilityMismatch)
		return id, nil, err
	}
	if _, err := a.Client.Accept(ctx, id); err != nil && !a.acceptedAnyway(ctx, id, err) {
		return id, nil, fmt.Errorf("%s: accept: %w", id, err)
	}
	a.logf("%s: accepted %q", id, m.Title)
	a.taken(id)
	return id, m, nil
}

// work does an accepted job: the lab room, the rerun in its own sandbox
// (with the manifest's own limits) and its own work directory, and the
// publication. Several work calls may run at once (RunLoop).
func (a *Agent) work(ctx context.Context, id string, m *dotlab.Manifest) error {
	if _, err := a.Client.JoinLab(ctx, id, dotlab.RoleRunner); err != nil {
		a.logf("%s: could not open the lab room: %v", id, err)
	}
	a.post(ctx, id, "note", fmt.Sprintf("Accepted. Verifying %d input hash(es), then image %s, code, and the run.", len(m.Datasets), m.Environment.ImageDigest()))
	dir := a.workDir("run", id)
	rec, err := a.Engine.Rerun(runner.WithInputArchive(ctx, a.Client.InputArchive(id)), m, dir)
	if err != nil {
		a.post(ctx, id, "blocker", "No outcome could be made (a failure on the runner's side, not the claim's); retrying later may help.")
		return fmt.Errorf("%s: rerun: %w", id, err)
	}
	a.post(ctx, id, "note", fmt.Sprintf("Rerun finished: %s. Publishing the run with its logs.", rec.Body.Outcome), runner.LogsFile, runner.RunFile)
	if rec.Body.Outcome == dotlab.OutcomeNotReproduced || rec.Body.Outcome == dotlab.OutcomeReproduced {
		if lines := dotlab.DescribeMismatches(rec.Comparisons); len(lines) > 0 {
			a.post(ctx, id, "finding", "Outside tolerance: "+strings.Join(lines, "; "), "results.json")
		}
	}
	_, err = a.Publish(ctx, id, dir, rec)
	return err
}

// Publish publishes rec, the rerun of claim id that Engine wrote into dir,
// as the job's run (POST /runs, docs/protocol.md §6) with the SHA-256 of
// its logs.jsonl (logs_sha256, and logs_uri where the server will serve
// them), then uploads exactly those logs, which the run record fixes
// (§6 "Logs"), and posts the result to the room. A run the server refuses
// for its analysis-controlled text (invalid, too_large) is published again
// without that text. RunOnce and `dotlab mcp`'s publish tool both publish
// through it. The error is the server's (*dotlab.Error) when it refused.
func (a *Agent) Publish(ctx context.Context, id, dir string, rec *runner.Record) (*dotlab.Run, error) {
	body := rec.Body
	body.JobID = id
	logs, err := os.ReadFile(filepath.Join(dir, runner.LogsFile))
	if err == nil {
		sum := sha256.Sum256(logs)
		body.LogsSHA256 = hex.EncodeToString(sum[:])
		body.LogsURI = a.Client.LogsURL(id)
	} else {
		a.logf("%s: no logs to publish: %v", id, err)
	}
	a.listOutputs(ctx, id, &body)
	run, key, err := postSigned(a, "publishing", id, func(k *attest.Key) { a.signRun(ctx, k, &body) },
		func() (*dotlab.Run, error) { return a.Client.PublishRun(ctx, &body) })
	if code := dotlab.ErrorCode(err); code == dotlab.EINVALID || code == dotlab.ETOOLARGE {
		// The notes and output file names come from the analysis, which a
		// claim controls: if they are what the server refuses (a token-like
		// string, a huge output listing), publish the outcome without them
		// rather than abandon the job. logs.jsonl keeps the full record.
		a.logf("%s: publish refused (%v); retrying without analysis-controlled text", id, err)
		body.Notes = fmt.Sprintf("%s. %s", body.Outcome, withheld(code, dropOutputs(code, &body)))
		a.signRun(ctx, key, &body)
		run, err = a.Client.PublishRun(ctx, &body)
	}
	if err != nil {
		a.post(ctx, id, "blocker", "Publishing was refused: "+firstLine(dotlab.ErrorCode(err)))
		return nil, fmt.Errorf("%s: publish: %w", id, err)
	}
	a.logf("%s: published %s: %s", id, run.ID, run.Outcome)
	note := fmt.Sprintf("Published run %s: %s.", run.ID, run.Outcome)
	if body.LogsSHA256 != "" {
		note += " " + a.uploadLogs(ctx, id, logs)
	}
	a.post(ctx, id, "note", note)
	return run, nil
}

// listOutputs sends body's output hashes as an output listing beside the
// record (PUT /jobs/{id}/outputs, docs/protocol.md §6 "Output listing")
// when inline they would pass dotlab.InlineOutputHashesMax bytes: it
// uploads the listing of every output and leaves inline only results.json
// and the streams, with the listing's pin in output_listing. A listing that
// cannot be sent (over its bounds, refused) leaves body as it was, and the
// record falls back as before (a too_large record keeps results.json).
func (a *Agent) listOutputs(ctx context.Context, id string, body *dotlab.RunBody) {
	inline, err := json.Marshal(body.OutputHashes)
	if err != nil || len(inline) <= dotlab.InlineOutputHashesMax {
		return
	}
	listing, _, err := dotlab.EncodeOutputListing(body.OutputHashes)
	if err != nil {
		a.logf("%s: %d output hashes do not fit inline nor in a listing: %v", id, len(body.OutputHashes), err)
		return
	}
	pin, err := a.Client.PutOutputListing(ctx, id, listing)
	if err != nil {
		a.logf("%s: output listing refused: %v", id, err)
		return
	}
	a.logf("%s: %d output hashes sent as a listing (%d bytes, sha256 %s)", id, pin.Count, pin.Bytes, pin.SHA256)
	body.OutputListing = pin
	body.OutputHashes = dotlab.InlineOutputs(body.OutputHashes)
}

// withheld says that the analysis's own messages were left out because the
// server refused them with code, and how many output hashes were left out
// with them (dropped), so that none goes missing unsaid.
func withheld(code string, dropped int) string {
	s := fmt.Sprintf("The analysis's own messages were withheld: the server refused them (%s); see logs.jsonl.", code)
	if dropped > 0 {
		s += fmt.Sprintf(" %d output hashes were left out with them (logs.jsonl lists every output).", dropped)
	}
	return s
}

// dropOutputs keeps only results.json's hash in a body the server refused
// as too large without an output listing (one that has a listing keeps
// every hash there), and returns how many hashes it left out.
func dropOutputs(code string, body *dotlab.RunBody) int {
	if code != dotlab.ETOOLARGE || body.OutputListing != nil {
		return 0
	}
	kept := resultsOnly(body.OutputHashes)
	dropped := len(body.OutputHashes) - len(kept)
	body.OutputHashes = kept
	return dropped
}

// resultsOnly keeps results.json's hash of an output listing the server
// refused as too large (the files the analysis wrote are its doing).
func resultsOnly(hashes map[string]string) map[string]string {
	out := map[string]string{}
	if h, ok := hashes["results.json"]; ok {
		out["results.json"] = h
	}
	return out
}

// uploadLogs attaches the published run's logs and says how the server
// judged them; a refusal is reported, not fatal (the run stands).
func (a *Agent) uploadLogs(ctx context.Context, id string, logs []byte) string {
	st, err := a.Client.PutLogs(ctx, id, logs)
	if err != nil {
		a.logf("%s: logs not uploaded: %v", id, err)
		return "Its logs were refused: " + firstLine(dotlab.ErrorCode(err)) + "."
	}
	if cov := st.LogCoverage; cov != nil && !cov.Complete {
		a.logf("%s: logs cover %d of %d items; missing: %s", id, cov.Covered, cov.Required, strings.Join(cov.Missing, "; "))
		return fmt.Sprintf("Logs uploaded (%d bytes): they cover %d of %d required items.", st.Bytes, cov.Covered, cov.Required)
	}
	return fmt.Sprintf("Logs uploaded (%d bytes), covering every required item.", st.Bytes)
}

// ChallengeOnce challenges at most one run in its challenge window that this
// agent has not looked at yet. It reruns the manifest independently first
// (it reads the run only afterwards, to compare), then posts the challenge
// with agrees and, on disagreement, notes naming every differing
// comparison and by how much. It returns the claim, or "" when none is open.
func (a *Agent) ChallengeOnce(ctx context.Context) (string, error) {
	if a.tried == nil {
		a.tried = map[string]bool{}
	}
	after := ""
	for {
		page, err := a.Client.Runs(ctx, dotlab.StateChallengeWindow, after)
		if err != nil {
			return "", err
		}
		for _, r := range page.Runs {
			if a.tried[r.ClaimID] || !dotlab.ValidClaimID(r.ClaimID) {
				continue
			}
			a.tried[r.ClaimID] = true
			return r.ClaimID, a.challenge(ctx, r.ClaimID, r.ID)
		}
		if page.Next == "" || page.Next <= after {
			return "", nil // the end, or a server that does not advance
		}
		after = page.Next
	}
}

func (a *Agent) challenge(ctx context.Context, claimID, runID string) error {
	m, err := a.fetchManifest(ctx, claimID)
	if err != nil {
		return fmt.Errorf("%s: manifest: %w", claimID, err)
	}
	a.logf("%s: rerunning independently to challenge %s", claimID, runID)
	dir := a.workDir("challenge", claimID)
	rec, err := a.Engine.Rerun(runner.WithInputArchive(ctx, a.Client.InputArchive(claimID)), m, dir)
	if err != nil {
		return fmt.Errorf("%s: rerun: %w", claimID, err)
	}
	ch, err := a.PostChallenge(ctx, claimID, runID, dir, rec)
	switch code := dotlab.ErrorCode(err); {
	case code == dotlab.EROLECONFLICT || code == dotlab.ECONFLICT || code == dotlab.EWINDOWCLOSED:
		a.logf("%s: not challenged: %v", claimID, err)
		return nil
	case err != nil:
		return fmt.Errorf("%s: challenge: %w", claimID, err)
	}
	a.logf("%s: challenge %s posted: %s (agrees: %v)", claimID, ch.ID, ch.Outcome, ch.Agrees)
	return nil
}

// PostChallenge challenges run runID of claim claimID with rec, this
// agent's independent rerun of the claim's manifest into dir, made before
// the run was read (docs/protocol.md §7), pinning the SHA-256 of dir's
// logs.jsonl (logs_sha256; the challenger keeps the logs): it reads the run only now, sets agrees
// from the two outcomes (dotlab.Agrees) and, on disagreement, notes naming
// every differing comparison and by how much (DisagreementNotes), and posts
// POST /challenges. A challenge the server refuses for analysis-controlled
// text (invalid, too_large) is posted again without it. ChallengeOnce and
// `dotlab mcp`'s challenge tool both challenge through it; the error is the
// server's (*dotlab.Error) when it refused.
func (a *Agent) PostChallenge(ctx context.Context, claimID, runID, dir string, rec *runner.Record) (*dotlab.Challenge, error) {
	run, err := a.Client.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	agrees := dotlab.Agrees(run.Outcome, rec.Body.Outcome)
	body := dotlab.ChallengeBody{RunBody: rec.Body, ClaimID: claimID, Agrees: &agrees}
	body.JobID = ""
	if logs, err := os.ReadFile(filepath.Join(dir, runner.LogsFile)); err == nil {
		// The challenger keeps its logs; pinning their hash lets its
		// signature name them (and the challenge be signed at all when the
		// analysis wrote no results.json).
		sum := sha256.Sum256(logs)
		body.LogsSHA256 = hex.EncodeToString(sum[:])
	}
	a.listOutputs(ctx, claimID, &body.RunBody)
	if !agrees {
		body.Notes = DisagreementNotes(run, rec)
	}
	ch, key, err := postSigned(a, "challenging", claimID, func(k *attest.Key) { a.signChallenge(ctx, k, &body) },
		func() (*dotlab.Challenge, error) { return a.Client.Challenge(ctx, &body) })
	if code := dotlab.ErrorCode(err); code == dotlab.EINVALID || code == dotlab.ETOOLARGE {
		// As for a run (Publish): the analysis's messages and file names
		// must not make an honest challenge impossible; the comparisons
		// and the disagreement lines are this agent's own text.
		a.logf("%s: challenge refused (%v); retrying without analysis-controlled text", claimID, err)
		own := *rec
		own.Body.Notes = withheld(code, dropOutputs(code, &body.RunBody))
		body.Notes = own.Body.Notes
		if !agrees {
			body.Notes = DisagreementNotes(run, &own)
		}
		a.signChallenge(ctx, key, &body)
		ch, err = a.Client.Challenge(ctx, &body)
	}
	return ch, err
}

// DisagreementNotes says which comparisons differ between the run and this
// rerun and by how much (the notes a disagreeing challenge must carry).
func DisagreementNotes(run *dotlab.Run, rec *runner.Record) string {
	var lines []string
	for _, d := range dotlab.Differences(run.Comparisons, rec.Comparisons) {
		if !d.MatchDiffers() {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: my rerun %s vs the run's %s, difference %s (%s for me, %s for the run)",
			d.Name, d.Challenger, d.Runner, d.Delta, within(d.ChallengerMatch), within(d.RunnerMatch)))
	}
	if len(lines) == 0 {
		return fmt.Sprintf("My rerun's outcome is %s, the run's is %s. %s", rec.Body.Outcome, run.Outcome, rec.Body.Notes)
	}
	sort.Strings(lines)
	return fmt.Sprintf("My rerun gives %s, the run %s. %s.", rec.Body.Outcome, run.Outcome, strings.Join(lines, "; "))
}

func within(match bool) string {
	if match {
		return "within tolerance"
	}
	return "outside tolerance"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
