package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/mcpserver"
	"github.com/dotlab/dotlab/runner"
)

// meanScript writes the mean and the count of the dataset's numbers.
const meanScript = `awk 'NR>1{s+=$1;n++} END{printf "{\"mean\": %s, \"n\": %d}\n", s/n, n}' "$DOTLAB_DATA_DIR/in/data.csv" > "$DOTLAB_OUT_DIR/results.json"`

// fixture is what the claims of the whole-protocol test pin: a busybox
// image in the shared cache, a dataset served over HTTP and the analysis
// in a git repository served over git's smart HTTP, all on loopback.
type fixture struct {
	cache, image, digest, dataURL, dataSHA, repo, commit string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testfix.Need(t, true, "runc", "busybox", "git")
	f := &fixture{cache: t.TempDir()}
	store, err := runner.OpenImageStore(f.cache)
	if err != nil {
		t.Fatal(err)
	}
	d, err := store.Build(testfix.BusyboxRootfs(t), "localhost/test/busybox")
	if err != nil {
		t.Fatal(err)
	}
	f.digest, f.image = d.String(), "localhost/test/busybox@"+d.String()
	data := []byte("x\n1\n2\n3\n4\n")
	sum := sha256.Sum256(data)
	f.dataSHA = hex.EncodeToString(sum[:])
	ds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(data) }))
	t.Cleanup(ds.Close)
	f.dataURL = ds.URL + "/data.csv"
	root := t.TempDir()
	dir := filepath.Join(root, "analysis")
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	f.commit = testfix.Commit(t, r, dir, map[string]string{"run.sh": meanScript + "\n"})
	f.repo = testfix.GitHTTP(t, root) + "/analysis/.git"
	return f
}

// manifest is a claim of the mean (2.5) and count (4) of the dataset.
func (f *fixture) manifest(title string) string {
	seed := int64(42)
	m := dotlab.Manifest{
		SpecVersion: "0.1", Title: title, Source: dotlab.Source{Citation: "DotLab MCP tests (2026)."},
		Datasets:    []dotlab.Dataset{{Name: "data", URL: f.dataURL, SHA256: f.dataSHA, Path: "in/data.csv"}},
		Code:        dotlab.Code{Repository: f.repo, Commit: f.commit},
		Environment: dotlab.Environment{Image: f.image},
		Seed:        &seed,
		Entrypoint:  []string{"sh", "run.sh"},
		Limits:      dotlab.Limits{TimeoutSeconds: 60, MemoryMB: 128, CPUs: 1},
		Targets: []dotlab.Target{
			{Name: "mean", Value: "2.5", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0"}},
			{Name: "n", Value: "4", Tolerance: dotlab.Tolerance{Type: "relative", Value: "0.01"}},
		},
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestWholeProtocolThroughMCP drives every role through `dotlab mcp` with
// the SDK's own client over stdio, against a real server on SQLite and the
// real sandbox (runc): a submitter lists a claim; a runner (whose server
// comes from the config `dotlab agent register` wrote) draws it, is
// refused a decline it has no reason for, accepts, joins the lab room,
// reruns in runc with progress notifications and publishes with its logs;
// a second claim's run is misreported by a runner outside MCP; a
// challenger lists the runs in their window (no values), reruns both and
// challenges both, agreeing with the honest run and disagreeing with the
// other; three reviewers read the dispute (one reruns) and vote, and the
// majority settles it. No answer of any session ever holds a key.
func TestWholeProtocolThroughMCP(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	srv := startServer(t)
	rec := &recorder{}
	sub := register(t, srv.base, "submitter", "")
	run := register(t, srv.base, "runner", "")
	cheat := register(t, srv.base, "misreporter", "")
	chal := register(t, srv.base, "challenger", "")
	revs := []*registered{register(t, srv.base, "reviewer-1", ""), register(t, srv.base, "reviewer-2", ""), register(t, srv.base, "reviewer-3", "")}
	flags := []string{"--cache", f.cache, "--allow-private-urls"}

	ss := connect(t, sub, rec, append(flags, "--server", srv.base)...)
	a := ok[mcpserver.ClaimView](ss, "submit_claim", map[string]any{"manifest": f.manifest("Mean of four numbers (MCP claim A)"), "field": "statistics"})
	if a.ID != "DL-0001" || a.State != "funded" || a.Title.Text != "Mean of four numbers (MCP claim A)" {
		t.Fatalf("submit_claim: %+v", a)
	}
	runnerJob(t, connect(t, run, rec, flags...), srv, a.ID)

	// Claim B: its run is published by a runner that misreports the mean,
	// straight through the API (the MCP tools cannot publish typed values).
	c, _ := client.New(srv.base, "")
	b, err := c.WithKey(sub.key).SubmitClaim(ctx, []byte(f.manifest("Mean of four numbers (MCP claim B)")), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	misreport(t, c.WithKey(cheat.key), f, b.ID)

	challengerRound(t, connect(t, chal, rec, flags...), a.ID, b.ID)
	for i, rv := range revs {
		review(t, connect(t, rv, rec, flags...), b.ID, i)
	}
	cb, err := c.Claim(ctx, b.ID)
	if err != nil || cb.State != dotlab.StateSettled || cb.Outcome != dotlab.OutcomeReproduced {
		t.Fatalf("claim B after three votes: %+v %v", cb, err)
	}
	rec.noKeys(t, append([]*registered{sub, run, cheat, chal}, revs...)...)
}

// runnerJob is a runner's whole job through the tools.
func runnerJob(t *testing.T, s *session, srv *testServer, id string) {
	ctx := context.Background()
	if st := ok[mcpserver.StatusOutput](s, "status", nil); st.Server != srv.base || st.Name != "runner" {
		t.Fatalf("status (server from the registered config): %+v", st)
	}
	job := ok[mcpserver.NextJobOutput](s, "next_job", nil)
	if job.None || job.Job.ClaimID != id || job.Job.State != "offered" || len(job.Job.Missing) != 0 {
		t.Fatalf("next_job: %+v", job)
	}
	fails(s, "decline_job", map[string]any{"claim_id": id}, mcpserver.ENOMISMATCH)
	if j := ok[mcpserver.JobView](s, "accept_job", map[string]any{"claim_id": id}); j.State != "accepted" || j.PublishDeadline == nil {
		t.Fatalf("accept_job: %+v", j)
	}
	mf := ok[mcpserver.ManifestOutput](s, "get_manifest", map[string]any{"claim_id": id})
	if len(mf.Targets) != 2 || mf.Targets[0].Published != "2.5" || len(mf.Datasets) != 1 {
		t.Fatalf("get_manifest: %+v", mf)
	}
	ok[mcpserver.MemberView](s, "lab_join", map[string]any{"claim_id": id, "role": "runner"})
	ok[mcpserver.PostedView](s, "lab_post", map[string]any{"claim_id": id, "type": "note", "body": "Accepted; verifying the input hash, then the rerun."})
	rr := okWith[mcpserver.RerunOutput](s, "rerun", map[string]any{"claim_id": id, "purpose": "run"}, true)
	if rr.Outcome != "reproduced" || len(rr.Comparisons) != 2 || !rr.Comparisons[0].Match || rr.InputHashes["data"] == "" {
		t.Fatalf("rerun: %+v", rr)
	}
	if msgs := s.progress.all(); len(msgs) < 5 || !strings.HasPrefix(msgs[0], "step run") || !strings.Contains(strings.Join(msgs, "|"), "step execute") {
		t.Fatalf("rerun sent %d progress notifications: %q", len(msgs), msgs)
	}
	pub := ok[mcpserver.PublishOutput](s, "publish_run", map[string]any{"rerun_id": rr.RerunID})
	if pub.Run.Outcome != "reproduced" || pub.Run.Status != "challenge_window" || !pub.LogsUploaded || pub.Run.LogsSHA256 == "" {
		t.Fatalf("publish_run: %+v", pub)
	}
	fails(s, "publish_run", map[string]any{"rerun_id": rr.RerunID}, mcpserver.EWRONGRERUN)
	// What the server stores is the sandbox's record with its logs.
	c, _ := client.New(srv.base, "")
	r, err := c.Run(ctx, pub.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.Logs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(logs); r.LogsSHA256 != hex.EncodeToString(sum[:]) || r.LogCoverage == nil || !r.LogCoverage.Complete ||
		r.Body.InputHashes["data"] != rr.InputHashes["data"] || r.Comparisons[0].Rerun != "2.5" {
		t.Fatalf("stored run: %+v coverage %+v", r, r.LogCoverage)
	}
	room := ok[mcpserver.LabReadOutput](s, "lab_read", map[string]any{"claim_id": id})
	if len(room.Messages) < 2 || !strings.Contains(room.Messages[len(room.Messages)-1].Body.Text, "Published run "+pub.Run.ID) {
		t.Fatalf("room after publishing: %+v", room)
	}
}

// misreport takes claim id's job and publishes a run whose mean is off.
func misreport(t *testing.T, c *client.Client, f *fixture, id string) {
	ctx := context.Background()
	if j, err := c.NextJob(ctx); err != nil || j.ClaimID != id {
		t.Fatalf("misreporter's job: %+v %v", j, err)
	}
	if _, err := c.Accept(ctx, id); err != nil {
		t.Fatal(err)
	}
	seed := int64(42)
	_, err := c.PublishRun(ctx, &dotlab.RunBody{JobID: id, InputHashes: map[string]string{"data": f.dataSHA},
		OutputHashes: map[string]string{"results.json": strings.Repeat("a", 64)},
		Environment:  dotlab.RunEnvironment{ImageDigest: f.digest, Seed: &seed, CodeCommit: f.commit},
		Comparisons:  []dotlab.RunComparison{{Name: "mean", Rerun: "9.5"}, {Name: "n", Rerun: "4"}},
		Outcome:      dotlab.OutcomeNotReproduced, Notes: "The mean came out at 9.5."})
	if err != nil {
		t.Fatal(err)
	}
}

// challengerRound: the runs in their window carry no values; the
// challenger reruns each before the tool reads the run, and challenges.
func challengerRound(t *testing.T, s *session, a, b string) {
	res := s.call("list_challenge_runs", nil, false)
	var list mcpserver.ListRunsOutput
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &list)
	if res.IsError || len(list.Runs) != 2 || strings.Contains(string(raw), `"9.5"`) || strings.Contains(string(raw), "comparisons") {
		t.Fatalf("list_challenge_runs: %s", raw)
	}
	agree := okWith[mcpserver.RerunOutput](s, "rerun", map[string]any{"claim_id": a, "purpose": "challenge"}, true)
	fails(s, "publish_run", map[string]any{"rerun_id": agree.RerunID}, mcpserver.EWRONGRERUN)
	if ch := ok[mcpserver.ChallengeView](s, "challenge", map[string]any{"rerun_id": agree.RerunID}); !ch.Agrees || ch.ClaimID != a {
		t.Fatalf("challenge of the honest run: %+v", ch)
	}
	dis := okWith[mcpserver.RerunOutput](s, "rerun", map[string]any{"claim_id": b, "purpose": "challenge"}, true)
	ch := ok[mcpserver.ChallengeView](s, "challenge", map[string]any{"rerun_id": dis.RerunID})
	if ch.Agrees || ch.Outcome != "reproduced" || ch.Notes == nil || !strings.Contains(ch.Notes.Text, "mean: my rerun 2.5 vs the run's 9.5") {
		t.Fatalf("challenge of the misreported run: %+v", ch)
	}
	if v := ok[mcpserver.VerifyOutput](s, "verify", map[string]any{"target": b}); !v.Passed || v.Passes == 0 {
		t.Fatalf("verify %s: %+v", b, v)
	}
}

// review is one reviewer's turn: the dispute's evidence, a rerun for the
// first, a vote for the challenger naming the target.
func review(t *testing.T, s *session, id string, i int) {
	d := ok[mcpserver.NextDisputeOutput](s, "next_dispute", nil)
	if d.None || d.Dispute.ID != id || d.Dispute.Run.Outcome != "not_reproduced" || len(d.Dispute.Challenges) != 1 || len(d.Dispute.Votes) != i {
		t.Fatalf("reviewer %d: next_dispute: %+v", i+1, d)
	}
	diff := d.Dispute.Challenges[0].Differences
	if len(diff) != 2 || diff[0].Name != "mean" || diff[0].Runner != "9.5" || diff[0].Challenger != "2.5" || diff[0].RunnerMatch || !diff[0].ChallengerMatch {
		t.Fatalf("reviewer %d: differences %+v", i+1, diff)
	}
	if i == 0 {
		if rr := okWith[mcpserver.RerunOutput](s, "rerun", map[string]any{"claim_id": id, "purpose": "review"}, true); rr.Outcome != "reproduced" {
			t.Fatalf("reviewer's rerun: %+v", rr)
		}
	}
	v := ok[mcpserver.VoteOutput](s, "vote", map[string]any{"dispute_id": id, "vote": "challenger",
		"rationale": "mean: the challenger's rerun gives 2.5, the published value, within the absolute tolerance 0; the run's 9.5 is not what the data gives."})
	if v.VotesIn != i+1 || v.Quorum != 3 {
		t.Fatalf("reviewer %d: vote: %+v", i+1, v)
	}
	if i == 2 && (v.ClaimState != "settled" || v.ClaimOutcome != "reproduced") {
		t.Fatalf("the third vote: %+v", v)
	}
}
