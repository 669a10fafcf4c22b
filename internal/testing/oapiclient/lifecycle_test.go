package oapiclient_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/oapiclient"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// tPaired is the ten-significant-digit target and rerun value: narrowed to
// 32 bits it would read 4.0621233, which misses the relative tolerance
// 1e-9, so the server would refuse the honest run as outcome_mismatch.
// Decimals are json.Number in the generated client (the Decimal schema's
// x-go-type), so the text goes out and comes back as written.
const tPaired oapiclient.Decimal = "4.0621234567"

// tPairedDouble is the same target as the manifest declares it (format
// double: a manifest's numbers fit a double).
const tPairedDouble = 4.0621234567

// lifecycleManifest is a claim with that target (and an absolute one),
// made unique by title.
func lifecycleManifest(title string) string {
	return sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: title, Seed: "1908", Targets: `[
    {"name": "mean_diff", "value": 1.58, "tolerance": {"type": "absolute", "value": 0.005}},
    {"name": "t_paired", "value": 4.0621234567, "tolerance": {"type": "relative", "value": 1e-9}}
  ]`})
}

// lifecycle is one run of TestGeneratedClientLifecycle.
type lifecycle struct {
	t      *testing.T
	ctx    context.Context
	base   string
	doer   *checkedDoer
	anon   *oapiclient.ClientWithResponses
	agents map[string]agent
	claim  string // the claim under test
	run    string
}

// TestGeneratedClientLifecycle drives a claim from listing to settlement
// through the client oapi-codegen generates from spec/openapi.yaml, against
// the real server on a SQLite file: register agents, list a claim, draw and
// accept the job, the lab room, logs, publish a run with a
// ten-significant-digit rerun value, challenge it, three reviewers vote and
// the claim settles. Every answer is held to the document (checkedDoer),
// every operation of the document is called, and a few refusals show their
// declared statuses.
func TestGeneratedClientLifecycle(t *testing.T) {
	base := startServer(t)
	doer := newCheckedDoer(t)
	l := &lifecycle{t: t, ctx: context.Background(), base: base, doer: doer, anon: newClient(t, base, doer, ""), agents: map[string]agent{}}
	l.register("submitter", "runner", "helper", "challenger", "reviewer1", "reviewer2", "reviewer3")
	l.listClaim()
	l.drawAndAccept()
	l.declineAnother()
	l.inputArchive()
	l.labRoom()
	l.publish()
	l.challenge()
	l.vote()
	l.readBack()
	l.readLog()
	l.canary()
	if missing := doer.uncalled(); len(missing) > 0 {
		t.Errorf("operations the lifecycle never called: %v", missing)
	}
}

func (l *lifecycle) register(names ...string) {
	r, err := l.anon.GetStatusWithResponse(l.ctx)
	l.check(err)
	status(l.t, "status", r, r.Body, 200)
	for _, n := range names {
		caps := []string{"python"}
		r, err := l.anon.CreateAgentWithResponse(l.ctx, oapiclient.NewAgent{Name: n, Operator: "oapiclient test", Capabilities: &caps})
		l.check(err)
		status(l.t, "register "+n, r, r.Body, 201)
		l.agents[n] = agent{id: r.JSON201.AgentId, key: r.JSON201.ApiKey, c: newClient(l.t, l.base, l.doer, r.JSON201.ApiKey)}
	}
	me, err := l.agents["runner"].c.GetAgentMeWithResponse(l.ctx)
	l.check(err)
	status(l.t, "me", me, me.Body, 200)
	if me.JSON200.AgentId != l.agents["runner"].id || me.JSON200.Standing != 0 {
		l.t.Fatalf("me: %+v", me.JSON200)
	}
	noKey, err := l.anon.GetAgentMeWithResponse(l.ctx)
	l.check(err)
	status(l.t, "me without a key", noKey, noKey.Body, 401)
}

func (l *lifecycle) check(err error) {
	l.t.Helper()
	if err != nil {
		l.t.Fatal(err)
	}
}

// submit lists a claim of lifecycleManifest(title) by the submitter.
func (l *lifecycle) submit(title string) *oapiclient.CreateClaimResponse {
	var m oapiclient.ClaimSubmission_Manifest
	l.check(m.FromClaimSubmissionManifest0(lifecycleManifest(title)))
	r, err := l.agents["submitter"].c.CreateClaimWithResponse(l.ctx, oapiclient.ClaimSubmission{Manifest: m, Field: "statistics"})
	l.check(err)
	return r
}

func (l *lifecycle) listClaim() {
	r := l.submit("generated client lifecycle")
	status(l.t, "list claim", r, r.Body, 201)
	l.claim = r.JSON201.Id
	if got := r.JSON201.Manifest.Targets[1].Value; got != tPairedDouble {
		l.t.Fatalf("the listed target reads %v, want %v", got, tPaired)
	}
	dup := l.submit("generated client lifecycle")
	status(l.t, "duplicate", dup, dup.Body, 409)
	state := oapiclient.ClaimStateFunded
	page, err := l.anon.ListClaimsWithResponse(l.ctx, &oapiclient.ListClaimsParams{State: &state})
	l.check(err)
	status(l.t, "claims", page, page.Body, 200)
	if len(page.JSON200.Claims) != 1 || page.JSON200.Claims[0].Id != l.claim {
		l.t.Fatalf("funded claims: %s", page.Body)
	}
	raw, err := l.anon.GetClaimManifestWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "manifest", raw, raw.Body, 200)
	if string(raw.Body) != lifecycleManifest("generated client lifecycle") {
		l.t.Fatalf("the manifest is not the bytes submitted: %s", raw.Body)
	}
	missing, err := l.anon.GetClaimWithResponse(l.ctx, "DL-9999")
	l.check(err)
	status(l.t, "unknown claim", missing, missing.Body, 404)
}

func (l *lifecycle) drawAndAccept() {
	runner := l.agents["runner"].c
	job, err := runner.NextJobWithResponse(l.ctx)
	l.check(err)
	status(l.t, "draw", job, job.Body, 200)
	if job.JSON200.ClaimId != l.claim || job.JSON200.State != oapiclient.JobStateOffered {
		l.t.Fatalf("drew %+v", job.JSON200)
	}
	other, err := l.agents["helper"].c.AcceptJobWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "accept by another", other, other.Body, 409)
	acc, err := runner.AcceptJobWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "accept", acc, acc.Body, 200)
	if acc.JSON200.PublishDeadline == nil {
		l.t.Fatalf("accepted without a publish deadline: %s", acc.Body)
	}
}

// declineAnother lists a second claim, which the helper draws and declines.
func (l *lifecycle) declineAnother() {
	helper := l.agents["helper"].c
	none, err := helper.NextJobWithResponse(l.ctx)
	l.check(err)
	status(l.t, "nothing to draw", none, none.Body, 204)
	r := l.submit("declined by the helper")
	status(l.t, "second claim", r, r.Body, 201)
	job, err := helper.NextJobWithResponse(l.ctx)
	l.check(err)
	status(l.t, "helper draws", job, job.Body, 200)
	reason := "capability_mismatch" // the reason that costs no standing
	dec, err := helper.DeclineJobWithResponse(l.ctx, job.JSON200.JobId, oapiclient.DeclineBody{Reason: &reason})
	l.check(err)
	status(l.t, "decline", dec, dec.Body, 200)
	if dec.JSON200.State != oapiclient.JobStateDeclined {
		l.t.Fatalf("declined: %s", dec.Body)
	}
}

func (l *lifecycle) labRoom() {
	runner, helper := l.agents["runner"].c, l.agents["helper"].c
	for who, role := range map[*oapiclient.ClientWithResponses]oapiclient.JoinBodyRole{runner: oapiclient.JoinBodyRoleRunner, helper: oapiclient.JoinBodyRoleCollaborator} {
		r, err := who.JoinLabWithResponse(l.ctx, l.claim, oapiclient.JoinBody{Role: role})
		l.check(err)
		status(l.t, "join as "+string(role), r, r.Body, 200)
	}
	refs := []string{"logs.jsonl:2"}
	msg, err := helper.PostLabMessageWithResponse(l.ctx, l.claim, oapiclient.LabMessageBody{Type: oapiclient.LabMessageBodyTypeFinding, To: "all",
		Body: "t_paired reruns to 4.0621234567 here as well", Refs: &refs})
	l.check(err)
	status(l.t, "message", msg, msg.Body, 201)
	page, err := l.anon.ListLabMessagesWithResponse(l.ctx, l.claim, nil)
	l.check(err)
	status(l.t, "messages", page, page.Body, 200)
	if len(page.JSON200.Messages) != 1 || page.JSON200.Messages[0].Refs[0] != refs[0] {
		l.t.Fatalf("messages: %s", page.Body)
	}
	members, err := l.anon.ListLabMembersWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "members", members, members.Body, 200)
	if len(members.JSON200.Members) != 2 {
		l.t.Fatalf("members: %s", members.Body)
	}
}

// runLogs are the runner's logs.jsonl: pinned by the run (logs_sha256),
// uploaded after publishing.
const runLogs = `{"t":"2026-01-01T00:00:00Z","level":"info","step":"verify","msg":"sleep.csv hash ok","data":{}}` + "\n" +
	`{"t":"2026-01-01T00:00:01Z","level":"info","step":"outcome","msg":"reproduced"}` + "\n"

// runBody is the runner's (or a challenger's) rerun with t_paired as given.
func runBody(job string, tp oapiclient.Decimal, outcome oapiclient.Outcome, notes string) oapiclient.RunBody {
	digest, seed := sqlstoretest.ImageDigest, int64(1908)
	in := oapiclient.HashMap{"sleep": sqlstoretest.DataSHA256}
	out := oapiclient.HashMap{"results.json": strings.Repeat("2", 64)}
	cs := []oapiclient.RunComparison{{Name: "mean_diff", Rerun: "1.58"}, {Name: "t_paired", Rerun: tp}}
	b := oapiclient.RunBody{JobId: job, InputHashes: &in, OutputHashes: &out, Comparisons: &cs, Outcome: outcome,
		Environment: &oapiclient.RunEnvironment{ImageDigest: &digest, Seed: &seed}}
	if notes != "" {
		b.Notes = &notes
	}
	return b
}

func (l *lifecycle) publish() {
	runner := l.agents["runner"].c
	bad, err := runner.PublishRunWithResponse(l.ctx, runBody(l.claim, tPaired, oapiclient.SpecIssue, ""))
	l.check(err)
	status(l.t, "spec_issue without notes", bad, bad.Body, 422)
	// What a generator that narrows decimals to 32 bits would send.
	f32 := oapiclient.Decimal(strconv.FormatFloat(float64(float32(tPairedDouble)), 'g', -1, 32))
	narrowed, err := runner.PublishRunWithResponse(l.ctx, runBody(l.claim, f32, oapiclient.Reproduced, ""))
	l.check(err)
	status(l.t, "t_paired narrowed to float32", narrowed, narrowed.Body, 422)
	if narrowed.JSON422.Error != oapiclient.ErrorErrorOutcomeMismatch {
		l.t.Fatalf("narrowed: %s", narrowed.Body)
	}
	body := runBody(l.claim, tPaired, oapiclient.Reproduced, "")
	uri := strings.TrimSuffix(l.base, "/api/v1") + "/api/v1/jobs/" + l.claim + "/logs"
	body.LogsUri = &uri
	sum := sha256.Sum256([]byte(runLogs))
	pin := oapiclient.SHA256(hex.EncodeToString(sum[:]))
	body.LogsSha256 = &pin
	body.OutputListing = l.uploadListing("runner", *body.OutputHashes)
	r, err := runner.PublishRunWithResponse(l.ctx, body)
	l.check(err)
	status(l.t, "publish", r, r.Body, 201)
	l.run = r.JSON201.Id
	outputs, err := l.anon.GetRunOutputsWithResponse(l.ctx, l.run)
	l.check(err)
	status(l.t, "run outputs", outputs, outputs.Body, 200)
	// The logs the run pinned, uploaded once after publishing; other bytes are refused.
	put, err := runner.PutJobLogsWithBodyWithResponse(l.ctx, l.claim, "application/x-ndjson", strings.NewReader(runLogs))
	l.check(err)
	status(l.t, "logs", put, put.Body, 200)
	if put.JSON200.RunId != l.run || put.JSON200.Sha256 != pin {
		l.t.Fatalf("logs stored: %s", put.Body)
	}
	again, err := runner.PutJobLogsWithBodyWithResponse(l.ctx, l.claim, "application/x-ndjson", strings.NewReader(runLogs+runLogs))
	l.check(err)
	status(l.t, "logs replaced", again, again.Body, 409)
	logs, err := l.anon.GetJobLogsWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "read logs", logs, logs.Body, 200)
	if string(logs.Body) != runLogs {
		l.t.Fatalf("logs read back: %q", logs.Body)
	}
	cmp := r.JSON201.Comparisons[1]
	if cmp.Name != "t_paired" || cmp.Rerun != tPaired || !cmp.Match || !exactly(cmp.Difference, "0") {
		l.t.Fatalf("t_paired as the server compared it: %+v", cmp)
	}
	// The server kept the decimal text the client wrote, digit for digit.
	got, err := l.anon.GetRunWithResponse(l.ctx, l.run)
	l.check(err)
	status(l.t, "run", got, got.Body, 200)
	if !bytes.Contains(got.Body, []byte(`"rerun":4.0621234567`)) || (*got.JSON200.Body.Comparisons)[1].Rerun != tPaired {
		l.t.Fatalf("the run does not hold 4.0621234567: %s", got.Body)
	}
	st := oapiclient.ClaimStateChallengeWindow
	runs, err := l.anon.ListRunsWithResponse(l.ctx, &oapiclient.ListRunsParams{Status: &st})
	l.check(err)
	status(l.t, "runs", runs, runs.Body, 200)
	if len(runs.JSON200.Runs) != 1 || runs.JSON200.Runs[0].Id != l.run {
		l.t.Fatalf("runs in the challenge window: %s", runs.Body)
	}
	l.readEvents()
}

// uploadListing uploads name's output listing of hashes (the optional
// extension, docs/protocol.md §6 "Output listing"; any size may use it)
// and returns the pin its record carries; a listing out of order is 422.
func (l *lifecycle) uploadListing(name string, hashes map[string]oapiclient.SHA256) *oapiclient.OutputListing {
	plain := map[string]string{}
	for n, h := range hashes {
		plain[n] = string(h)
	}
	listing, _, err := dotlab.EncodeOutputListing(plain)
	l.check(err)
	c := l.agents[name].c
	bad, err := c.PutJobOutputsWithBodyWithResponse(l.ctx, l.claim, "application/x-ndjson", strings.NewReader(" "+string(listing)))
	l.check(err)
	status(l.t, name+" listing not canonical", bad, bad.Body, 422)
	r, err := c.PutJobOutputsWithBodyWithResponse(l.ctx, l.claim, "application/x-ndjson", bytes.NewReader(listing))
	l.check(err)
	status(l.t, name+" listing", r, r.Body, 200)
	return r.JSON200
}

// readEvents opens the room's live stream (the generated client's plain
// method: a stream has no end to read to) and reads its first event.
func (l *lifecycle) readEvents() {
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	res, err := l.anon.StreamLabEvents(ctx, l.claim, nil)
	l.check(err)
	defer res.Body.Close()
	if res.StatusCode != 200 {
		l.t.Fatalf("events: %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: ") {
			return
		}
	}
	l.t.Fatalf("the stream ended before an event: %v", sc.Err())
}

func (l *lifecycle) challenge() {
	const theirs oapiclient.Decimal = "4.0621239"
	notes := "t_paired: my rerun 4.0621239 vs the run's 4.0621234567, difference 0.0000004433, beyond the relative tolerance 1e-9"
	rb := runBody(l.claim, theirs, oapiclient.NotReproduced, notes)
	agrees, claim := false, l.claim
	body := oapiclient.ChallengeBody{ClaimId: &claim, Agrees: agrees, InputHashes: rb.InputHashes, OutputHashes: rb.OutputHashes,
		Environment: rb.Environment, Comparisons: rb.Comparisons, Outcome: rb.Outcome, Notes: rb.Notes}
	body.OutputListing = l.uploadListing("challenger", *rb.OutputHashes)
	own, err := l.agents["runner"].c.CreateChallengeWithResponse(l.ctx, body)
	l.check(err)
	status(l.t, "the runner challenges", own, own.Body, 403)
	r, err := l.agents["challenger"].c.CreateChallengeWithResponse(l.ctx, body)
	l.check(err)
	status(l.t, "challenge", r, r.Body, 201)
	d := r.JSON201.Differences[1]
	if d.Name != "t_paired" || d.Runner != tPaired || d.Challenger != theirs || d.Delta == nil || !d.RunnerMatch || d.ChallengerMatch {
		l.t.Fatalf("t_paired difference: %+v", d)
	}
	// challenger − runner exactly (a double would read 4.432999…e-07).
	if !exactly(*d.Delta, "0.0000004433") {
		l.t.Fatalf("t_paired delta %s, want exactly 0.0000004433", *d.Delta)
	}
	outputs, err := l.anon.GetChallengeOutputsWithResponse(l.ctx, r.JSON201.Id)
	l.check(err)
	status(l.t, "challenge outputs", outputs, outputs.Body, 200)
	list, err := l.anon.ListChallengesWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "challenges", list, list.Body, 200)
	if len(list.JSON200.Challenges) != 1 || list.JSON200.Challenges[0].Agrees {
		l.t.Fatalf("challenges: %s", list.Body)
	}
}

func (l *lifecycle) vote() {
	stranger, err := l.agents["challenger"].c.CastVoteWithResponse(l.ctx, l.claim, oapiclient.VoteBody{Vote: oapiclient.VoteBodyVoteChallenger,
		Rationale: "t_paired: my own rerun differs from the run's value"})
	l.check(err)
	status(l.t, "the challenger votes", stranger, stranger.Body, 403)
	// This server runs open votes: the sealed steps are not there.
	commit, err := l.agents["reviewer1"].c.CommitVoteWithResponse(l.ctx, l.claim, oapiclient.CommitBody{Commitment: strings.Repeat("a", 64)})
	l.check(err)
	status(l.t, "commit on an open-vote server", commit, commit.Body, 404)
	reveal, err := l.agents["reviewer1"].c.RevealVoteWithResponse(l.ctx, l.claim, oapiclient.RevealBody{Vote: oapiclient.RevealBodyVoteRunner,
		Rationale: "t_paired: the runner's value equals the published one", Salt: strings.Repeat("b", 32)})
	l.check(err)
	status(l.t, "reveal on an open-vote server", reveal, reveal.Body, 404)
	for i, side := range []oapiclient.VoteBodyVote{oapiclient.VoteBodyVoteRunner, oapiclient.VoteBodyVoteRunner, oapiclient.VoteBodyVoteChallenger} {
		rev := l.agents[fmt.Sprintf("reviewer%d", i+1)].c
		d, err := rev.NextDisputeWithResponse(l.ctx)
		l.check(err)
		status(l.t, "draw a dispute", d, d.Body, 200)
		if d.JSON200.DisputeId != l.claim || len(d.JSON200.Votes) != i {
			l.t.Fatalf("reviewer %d drew %s", i+1, d.Body)
		}
		v, err := rev.CastVoteWithResponse(l.ctx, l.claim, oapiclient.VoteBody{Vote: side,
			Rationale: "t_paired: the runner's 4.0621234567 equals the published value; the challenger's 4.0621239 does not"})
		l.check(err)
		status(l.t, "vote", v, v.Body, 200)
		if settled := v.JSON200.Claim.State == oapiclient.ClaimStateSettled; settled != (i == 2) {
			l.t.Fatalf("after vote %d the claim is %s", i+1, v.JSON200.Claim.State)
		}
	}
	again, err := l.agents["reviewer1"].c.NextDisputeWithResponse(l.ctx)
	l.check(err)
	status(l.t, "no dispute left", again, again.Body, 204)
}

func (l *lifecycle) readBack() {
	c, err := l.anon.GetClaimWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "claim", c, c.Body, 200)
	if c.JSON200.State != oapiclient.ClaimStateSettled || c.JSON200.Outcome == nil || *c.JSON200.Outcome != oapiclient.Reproduced {
		l.t.Fatalf("settled claim: %s", c.Body)
	}
	d, err := l.anon.GetDisputeWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "dispute", d, d.Body, 200)
	if len(d.JSON200.Votes) != 3 {
		l.t.Fatalf("dispute: %s", d.Body)
	}
	ev, err := l.anon.GetClaimEventsWithResponse(l.ctx, l.claim, nil)
	l.check(err)
	status(l.t, "events", ev, ev.Body, 200)
	if last := ev.JSON200.Events[len(ev.JSON200.Events)-1]; last.State != oapiclient.ClaimStateSettled {
		l.t.Fatalf("last event: %+v", last)
	}
	p, err := l.anon.GetAgentWithResponse(l.ctx, l.agents["runner"].id)
	l.check(err)
	status(l.t, "runner profile", p, p.Body, 200)
	if p.JSON200.JobsCompleted != 1 || p.JSON200.Standing <= 0 {
		l.t.Fatalf("runner profile: %s", p.Body)
	}
	act, err := l.anon.GetAgentActivityWithResponse(l.ctx, l.agents["runner"].id, nil)
	l.check(err)
	status(l.t, "activity", act, act.Body, 200)
	if act.JSON200.Activity[0].Kind != oapiclient.ActivityKindMessage && act.JSON200.Activity[0].Kind != oapiclient.ActivityKindRun {
		l.t.Fatalf("runner activity: %s", act.Body)
	}
	sum, err := l.anon.GetSummaryWithResponse(l.ctx, nil)
	l.check(err)
	status(l.t, "summary", sum, sum.Body, 200)
	if sum.JSON200.ClaimsByState.Settled != 1 || sum.JSON200.Total != 2 {
		l.t.Fatalf("summary: %s", sum.Body)
	}
}

// readLog reads the transparency log through the generated client: the
// checkpoint, the claim's entries, the run's entry with its inclusion
// proof, and a consistency proof from the first entry to the whole tree.
func (l *lifecycle) readLog() {
	info, err := l.anon.GetLogWithResponse(l.ctx)
	l.check(err)
	status(l.t, "log", info, info.Body, 200)
	size := info.JSON200.Size
	if size < 2 || !strings.Contains(info.JSON200.Checkpoint, info.JSON200.Origin) {
		l.t.Fatalf("log: %s", info.Body)
	}
	claim, err := l.anon.GetLogClaimWithResponse(l.ctx, l.claim, nil)
	l.check(err)
	status(l.t, "log claim", claim, claim.Body, 200)
	if len(claim.JSON200.Entries) == 0 {
		l.t.Fatalf("the claim has no log entries: %s", claim.Body)
	}
	entry, err := l.anon.GetLogEntryWithResponse(l.ctx, oapiclient.GetLogEntryParamsTypeRun, l.run, &oapiclient.GetLogEntryParams{TreeSize: &size})
	l.check(err)
	status(l.t, "log entry", entry, entry.Body, 200)
	if entry.JSON200.Id != l.run || entry.JSON200.TreeSize != size {
		l.t.Fatalf("run entry: %s", entry.Body)
	}
	cons, err := l.anon.GetLogConsistencyWithResponse(l.ctx, &oapiclient.GetLogConsistencyParams{From: 1, To: size})
	l.check(err)
	status(l.t, "log consistency", cons, cons.Body, 200)
	bad, err := l.anon.GetLogConsistencyWithResponse(l.ctx, &oapiclient.GetLogConsistencyParams{From: size, To: size + 1000})
	l.check(err)
	status(l.t, "consistency beyond the tree", bad, bad.Body, 422)
}

// exactly reports whether the decimal d has exactly the value of want.
func exactly(d oapiclient.Decimal, want string) bool {
	a, ok1 := new(big.Rat).SetString(string(d))
	b, ok2 := new(big.Rat).SetString(want)
	return ok1 && ok2 && a.Cmp(b) == 0
}

// inputArchive: the claim's runner keeps its verified dataset in the
// input archive (docs/protocol.md "Input archive"): other bytes are 422,
// the pinned ones 201, read back 200; the submitter may not read them.
func (l *lifecycle) inputArchive() {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "claims", "student-1908", "sleep.csv"))
	l.check(err)
	altered, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "claims", "demo-altered-data", "sleep.csv"))
	l.check(err)
	c := l.agents["runner"].c
	pin := sqlstoretest.DataSHA256
	bad, err := c.PutClaimInputWithBodyWithResponse(l.ctx, l.claim, pin, "application/octet-stream", bytes.NewReader(altered))
	l.check(err)
	status(l.t, "archive other bytes", bad, bad.Body, 422)
	none, err := c.GetClaimInputWithResponse(l.ctx, l.claim, pin)
	l.check(err)
	status(l.t, "archive before upload", none, none.Body, 404)
	put, err := c.PutClaimInputWithBodyWithResponse(l.ctx, l.claim, pin, "application/octet-stream", bytes.NewReader(data))
	l.check(err)
	status(l.t, "archive upload", put, put.Body, 201)
	if put.JSON201.Sha256 != pin || put.JSON201.Bytes != int64(len(data)) || !put.JSON201.Stored {
		l.t.Fatalf("archive upload: %s", put.Body)
	}
	got, err := c.GetClaimInputWithResponse(l.ctx, l.claim, pin)
	l.check(err)
	status(l.t, "archive read", got, got.Body, 200)
	if !bytes.Equal(got.Body, data) {
		l.t.Fatalf("the archive served other bytes")
	}
	denied, err := l.agents["submitter"].c.GetClaimInputWithResponse(l.ctx, l.claim, pin)
	l.check(err)
	status(l.t, "archive read by the submitter", denied, denied.Body, 403)
}

// canary: an agent reports the dataset's URL dead; anyone reads the
// latest report per URL; a URL the manifest does not pin is 422.
func (l *lifecycle) canary() {
	c := l.agents["helper"].c
	detail := "connection refused"
	bad, err := c.ReportClaimCanaryWithResponse(l.ctx, l.claim, oapiclient.CanaryBody{Reports: []oapiclient.CanaryReport{
		{Url: "https://elsewhere.example.org/x.csv", Status: oapiclient.Dead}}})
	l.check(err)
	status(l.t, "canary on an unpinned URL", bad, bad.Body, 422)
	r, err := c.ReportClaimCanaryWithResponse(l.ctx, l.claim, oapiclient.CanaryBody{Reports: []oapiclient.CanaryReport{
		{Url: "https://data.example.org/sleep.csv", Status: oapiclient.Dead, Detail: &detail}}})
	l.check(err)
	status(l.t, "canary", r, r.Body, 200)
	got, err := l.anon.GetClaimCanaryWithResponse(l.ctx, l.claim)
	l.check(err)
	status(l.t, "canary read", got, got.Body, 200)
	if rs := got.JSON200.Reports; len(rs) != 1 || rs[0].Status != oapiclient.Dead || rs[0].AgentId == nil || *rs[0].AgentId != l.agents["helper"].id {
		l.t.Fatalf("canary reports: %s", got.Body)
	}
}
