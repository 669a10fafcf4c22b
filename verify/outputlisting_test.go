package verify_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sqlstore"
)

// outputs is n output hashes as an analysis writing n files makes them,
// results.json among them with the fixture's hash.
func outputs(n int) map[string]string {
	out := map[string]string{"results.json": "2222222222222222222222222222222222222222222222222222222222222222"}
	for i := len(out); i < n; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprint("output ", i)))
		out[fmt.Sprintf("tables/part_%03d/row_%06d.csv", i/1000, i)] = hex.EncodeToString(sum[:])
	}
	return out
}

// TestLargestRunListingVerifies: DotLab's agent publishes a signed run of
// 100,000 outputs (the sandbox's output-count limit) and a signed
// challenge of 2,000 through its own Publish and PostChallenge: both send
// their hashes as an output listing beside the record on their own, every
// hash is kept, and `dotlab verify` fetches both listings and checks them
// against the records and their log entries. A listing changed in the
// database then fails verification, naming the run.
func TestLargestRunListingVerifies(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	ctx := context.Background()
	sub := e.agent("submitter")
	rc, rkey := e.signer("runner")
	c := must(sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("100,000 outputs"), "statistics"))
	must(rc.NextJob(ctx))
	must(rc.Accept(ctx, c.ID))
	rec := &runner.Record{Body: *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced)}
	rec.Body.OutputHashes = outputs(100_000)
	start := time.Now()
	run, err := (&agent.Agent{Client: rc, Key: rkey, Logf: t.Logf}).Publish(ctx, c.ID, t.TempDir(), rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published 100,000 output hashes through the agent in %v", time.Since(start).Round(time.Millisecond))
	if run.Body.OutputListing == nil || run.Body.OutputListing.Count != 100_000 || run.SignedBy == "" {
		t.Fatalf("run %s: listing %+v, signed by %q", run.ID, run.Body.OutputListing, run.SignedBy)
	}
	cc, ckey := e.signer("challenger")
	crec := &runner.Record{Body: *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced)}
	crec.Body.OutputHashes = outputs(2000)
	ch, err := (&agent.Agent{Client: cc, Key: ckey, Logf: t.Logf}).PostChallenge(ctx, c.ID, run.ID, t.TempDir(), crec)
	if err != nil {
		t.Fatal(err)
	}
	if ch.OutputListing == nil || ch.OutputListing.Count != 2000 || ch.SignedBy == "" {
		t.Fatalf("challenge %s: listing %+v, signed by %q", ch.ID, ch.OutputListing, ch.SignedBy)
	}
	start = time.Now()
	rep := e.verify(c.ID)
	wantPass(t, rep)
	t.Logf("verified in %v", time.Since(start).Round(time.Millisecond))
	checked := 0
	for _, l := range rep.OK {
		if strings.Contains(l, "output listing") {
			checked++
		}
	}
	if checked != 2 {
		t.Fatalf("%d output listings checked, want 2: %v", checked, rep.OK)
	}
	raw := rawDB(t, e)
	e.stop()
	if _, err := raw.Exec(`UPDATE output_listings SET listing = REPLACE(listing, $1, $2) WHERE record_id = $3`,
		rec.Body.OutputHashes["tables/part_050/row_050000.csv"], strings.Repeat("0", 64), run.ID); err != nil {
		t.Fatal(err)
	}
	e.start()
	wantFailure(t, e.verify(c.ID), "run "+run.ID, "output listing is sha256")
}
