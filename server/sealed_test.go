package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/verify"
)

// TestSealedVotesInvisibleUntilDecided: on `dotlab serve --sealed-votes`,
// the first two votes of a dispute, posted as the skill text says, are
// invisible to the third reviewer and to the public (the API's dispute,
// the claim's page, the lab room's page, the reviewers' profiles) until
// the third decides it; then they all show. GET /status names the mode.
func TestSealedVotesInvisibleUntilDecided(t *testing.T) {
	base, path, id, keys := startSealed(t)
	var st apiv1.Status
	doAt(t, base+"/api/v1", "GET", "/status", "", "").want(t, 200, "").decode(t, &st)
	if st.Votes != "sealed" {
		t.Fatalf("status votes %q, want sealed", st.Votes)
	}
	rationales := []string{"sd_diff: the first reviewer reads 1.17 as within 0.005", "sd_diff: the second reviewer reads 1.2299 as the right value"}
	for i, side := range []string{"challenger", "runner"} {
		doAt(t, base+"/api/v1", "GET", "/disputes/next", keys[i], "").want(t, 200, "")
		doAt(t, base+"/api/v1", "POST", "/disputes/"+id+"/vote", keys[i], voteBody(t, side, rationales[i])).want(t, 200, "")
	}
	var third dotlab.Dispute
	doAt(t, base+"/api/v1", "GET", "/disputes/next", keys[2], "").want(t, 200, "").decode(t, &third)
	if len(third.Votes) != 0 || third.Sealed == nil || len(third.Sealed.Votes) != 3 || third.Sealed.Votes[0].Commitment == "" {
		t.Fatalf("the third reviewer sees votes %+v, sealed %+v", third.Votes, third.Sealed)
	}
	if page := doAt(t, base, "GET", "/claims/"+id, "", "").want(t, 200, "").body; !strings.Contains(string(page), "Votes are sealed until the dispute is decided") ||
		!strings.Contains(string(page), "2 of 3 seats committed") {
		t.Fatalf("the claim page does not say the votes are sealed:\n%s", page)
	}
	seen := func() string {
		var all strings.Builder
		for _, p := range []string{"/api/v1/disputes/" + id, "/api/v1/claims/" + id, "/claims/" + id, "/labs/" + id, "/api/v1/labs/" + id + "/messages", "/api/v1/claims/" + id + "/events"} {
			all.Write(doAt(t, base, "GET", p, "", "").want(t, 200, "").body)
		}
		for _, a := range third.Sealed.Votes[:2] {
			all.Write(doAt(t, base, "GET", "/agents/"+a.ReviewerID, "", "").want(t, 200, "").body)
			all.Write(doAt(t, base+"/api/v1", "GET", "/agents/"+a.ReviewerID, "", "").want(t, 200, "").body)
		}
		return all.String()
	}
	for _, r := range rationales {
		if strings.Contains(seen(), r) || strings.Contains(seen(), r[len("sd_diff: "):]) {
			t.Fatalf("a sealed rationale is public before the decision: %q", r)
		}
	}
	witness := filepath.Join(t.TempDir(), "logs.json")
	if rep := verifyClaim(t, base, witness, id); !rep.Passed() {
		t.Fatalf("a sealed dispute does not verify: %v", rep.Failures)
	}
	doAt(t, base+"/api/v1", "POST", "/disputes/"+id+"/vote", keys[2], voteBody(t, "challenger", "sd_diff: the third reviewer sides with 1.17")).want(t, 200, "")
	after := seen()
	for _, r := range rationales {
		if !strings.Contains(after, r) {
			t.Fatalf("decided, yet %q is not shown", r)
		}
	}
	rep := verifyClaim(t, base, witness, id)
	if !rep.Passed() || !strings.Contains(strings.Join(rep.OK, "\n"), "matches its commitment") {
		t.Fatalf("the decided sealed dispute: failures %v, checks %v", rep.Failures, rep.OK)
	}
	// A vote rewritten after its commitment was logged is caught.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE votes SET salt = $1 WHERE claim_id = $2 AND reviewer_id = $3`, strings.Repeat("0", 64), id, third.Sealed.Votes[0].ReviewerID); err != nil {
		t.Fatal(err)
	}
	if rep := verifyClaim(t, base, witness, id); rep.Passed() || !strings.Contains(strings.Join(rep.Failures, "\n"), "does not match its commitment") {
		t.Fatalf("a rewritten salt verified: failures %v", rep.Failures)
	}
}

// verifyClaim runs dotlab verify's check of claim id on the server at base,
// keeping its checkpoints in witness.
func verifyClaim(t *testing.T, base, witness, id string) *verify.Report {
	t.Helper()
	c, err := client.New(base, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := (&verify.Verifier{Client: c, Witness: verify.Witness{Path: witness}}).Claim(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// sealedDispute makes a disputed claim in db (a not_reproduced run, a
// disagreeing challenge) and three reviewers; it returns the claim id and
// the reviewers' API keys.
func sealedDispute(t *testing.T, db *sqlstore.DB) (string, []string) {
	t.Helper()
	ctx := context.Background()
	p := sqlstoretest.Protocol(db)
	agent := func(name string) (*dotlab.Agent, string) {
		a, key, err := p.CreateAgent(ctx, dotlab.NewAgent{Name: name, Operator: "sealed test"})
		if err != nil {
			t.Fatal(err)
		}
		return a, key
	}
	sub, _ := agent("submitter")
	runner, _ := agent("runner")
	challenger, _ := agent("challenger")
	c, err := p.CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.NextJob(ctx, runner); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AcceptJob(ctx, runner.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishRun(ctx, runner, sqlstoretest.RunBody(c.ID, "1.58", "1.2299", dotlab.OutcomeNotReproduced), nil); err != nil {
		t.Fatal(err)
	}
	agrees := false
	body := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(c.ID, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: c.ID, Agrees: &agrees}
	body.Notes = "sd_diff: my rerun gives 1.17 (dividing by n, as Student did); the run's 1.2299 differs by 0.0599"
	if _, err := p.CreateChallenge(ctx, challenger, body, nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < 3; i++ {
		_, key := agent(fmt.Sprintf("reviewer%d", i))
		keys = append(keys, key)
	}
	return c.ID, keys
}

// TestSealedAgentCommitReveal: `dotlab review --commit` and `--reveal`'s
// agent side. A rationale that names no target is refused before anything
// is committed (the server cannot check a commitment, and the reveal would
// be refused); three commitments, then reveals, decide the dispute; the
// salts kept on disk are gone once revealed.
func TestSealedAgentCommitReveal(t *testing.T) {
	base, _, id, keys := startSealed(t)
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	ctx := context.Background()
	var agents []*agent.Agent
	for _, key := range keys {
		c, err := client.New(base, key)
		if err != nil {
			t.Fatal(err)
		}
		a := &agent.Agent{Client: c}
		if _, err := c.NextDispute(ctx); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	if _, err := agents[0].CommitVote(ctx, id, "runner", "this rationale names nothing it checked"); dotlab.ErrorCode(err) != dotlab.EINVALID {
		t.Fatalf("a rationale without a target was committed: %v", err)
	}
	dir, _ := agent.SealedPath(base)
	for i, side := range []string{"challenger", "challenger", "runner"} {
		if _, err := agents[i].CommitVote(ctx, id, side, "sd_diff: reviewer "+fmt.Sprint(i)+" read both reruns"); err != nil {
			t.Fatal(err)
		}
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(kept) != 3 {
		t.Fatalf("kept salts: %v", kept)
	}
	for _, a := range agents {
		if ds, err := a.RevealVotes(ctx); err != nil || len(ds) != 1 {
			t.Fatalf("reveal: %v %v", ds, err)
		}
	}
	var d dotlab.Dispute
	doAt(t, base+"/api/v1", "GET", "/disputes/"+id, "", "").want(t, 200, "").decode(t, &d)
	if d.Claim.State != dotlab.StateSettled || d.Claim.Outcome != dotlab.OutcomeReproduced || len(d.Votes) != 3 {
		t.Fatalf("after three reveals: %s %s, %d votes", d.Claim.State, d.Claim.Outcome, len(d.Votes))
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(kept) != 0 {
		t.Fatalf("salts kept after revealing: %v", kept)
	}
}

// startSealed serves a fresh SQLite database at path with sealed votes
// (hour-long windows) holding one disputed claim id (sealedDispute) and
// three would-be reviewers' API keys.
func startSealed(t *testing.T) (base, path, id string, keys []string) {
	t.Helper()
	clock := sqlstoretest.NewClock()
	windows := dotlab.Windows{Accept: time.Hour, Publish: time.Hour, Challenge: time.Hour, Quorum: 3, Sealed: true, Commit: time.Hour, Reveal: time.Hour}
	path = filepath.Join(t.TempDir(), "sealed.db")
	db, err := sqlstore.Open(context.Background(), "sqlite:"+path, sqlstore.Options{Clock: clock, Windows: windows})
	if err != nil {
		t.Fatal(err)
	}
	id, keys = sealedDispute(t, db)
	db.Close()
	base = servertest.Start(t, server.Config{DB: "sqlite:" + path, Windows: windows, SettleEvery: 10 * time.Millisecond, Version: "sealed", Clock: clock})
	return base, path, id, keys
}
