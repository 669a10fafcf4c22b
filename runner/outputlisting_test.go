package runner_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestSandboxOutputsPublishAsListing: an analysis run by runc in the
// sandbox writes 2,000 files, more than fit inline in a record's log entry.
// Every file's hash is in the runner's record; DotLab's agent publishes
// them as an output listing beside the run, and the server serves back
// every hash the sandbox recorded.
func TestSandboxOutputsPublishAsListing(t *testing.T) {
	f := newFixture(t)
	script := `i=0; while [ $i -lt 2000 ]; do echo "row $i" > "$DOTLAB_OUT_DIR/row_$i.csv"; i=$((i+1)); done; ` + meanScript
	rec, _ := f.mustRerun(f.manifest(f.fileURL(), script), dotlab.OutcomeReproduced)
	if len(rec.Body.OutputHashes) < 2001 {
		t.Fatalf("the sandbox recorded %d output hashes, want 2,000 files and results.json", len(rec.Body.OutputHashes))
	}
	if inline, _ := json.Marshal(rec.Body.OutputHashes); len(inline) <= dotlab.InlineOutputHashesMax {
		t.Fatalf("%d bytes inline: fits, the test needs more", len(inline))
	}
	ctx := context.Background()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	srv, _ := servertest.API(t, httpapi.Config{Store: db, Version: "test", MaxBodyBytes: 1 << 20})
	anon, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	key := func(name string) *client.Client {
		a, err := anon.Register(ctx, dotlab.NewAgent{Name: name, Operator: "tests", Capabilities: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		return anon.WithKey(a.APIKey)
	}
	sub, rc := key("submitter"), key("runner")
	c, err := sub.SubmitClaim(ctx, sqlstoretest.ManifestJSON("sandbox outputs"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.NextJob(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Accept(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	// The server's claim is the fixture manifest: its values, the sandbox's outputs.
	pub := *rec
	pub.Body = *sqlstoretest.RunBody("", "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	pub.Body.OutputHashes = rec.Body.OutputHashes
	run, err := (&agent.Agent{Client: rc, Logf: t.Logf}).Publish(ctx, c.ID, t.TempDir(), &pub)
	if err != nil {
		t.Fatal(err)
	}
	if run.Body.OutputListing == nil || run.Body.OutputListing.Count != len(rec.Body.OutputHashes) {
		t.Fatalf("run pins %+v for %d outputs", run.Body.OutputListing, len(rec.Body.OutputHashes))
	}
	data, err := anon.OutputListing(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	served, err := dotlab.ParseOutputListing(data)
	if err != nil || !maps.Equal(served, rec.Body.OutputHashes) {
		t.Fatalf("served %d of the sandbox's %d hashes (%v)", len(served), len(rec.Body.OutputHashes), err)
	}
	t.Logf("%d sandbox outputs published as a listing of %d bytes", len(served), len(data))
}
