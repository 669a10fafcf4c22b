package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sqlstore"
)

// fakeEngine "reruns" a sqlstoretest manifest: it writes the logs.jsonl a
// runner would (sqlstoretest.Logs) and returns the run it logged.
type fakeEngine struct{}

func (fakeEngine) Rerun(_ context.Context, m *dotlab.Manifest, outDir string) (*runner.Record, error) {
	body := sqlstoretest.RunBody("", "1.58", "1.17", dotlab.OutcomeReproduced)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(outDir, runner.LogsFile), sqlstoretest.Logs(body), 0o644); err != nil {
		return nil, err
	}
	return &runner.Record{Body: *body}, nil
}

// TestRunOncePublishesThenAttachesLogs: the runner step publishes its run
// with the SHA-256 of its logs.jsonl and logs_uri, then uploads exactly
// those logs, which the server fixes and judges complete (docs/protocol.md
// §6 "Logs"), against a real server on SQLite.
func TestRunOncePublishesThenAttachesLogs(t *testing.T) {
	ctx := context.Background()
	c := testServer(t)
	sub, run := submitterAndRunner(t, c)
	claim, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON("agent logs"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Client: c.WithKey(run.APIKey), Engine: fakeEngine{}, WorkDir: t.TempDir()}
	if id, err := a.RunOnce(ctx); err != nil || id != claim.ID {
		t.Fatalf("RunOnce: %q %v", id, err)
	}
	cv, err := c.Claim(ctx, claim.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, cv.RunID)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.Logs(ctx, claim.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.LogsSHA256 == "" || r.LogsSHA256 != sha256Hex(logs) || r.Body.LogsURI != c.LogsURL(claim.ID) || r.LogsUploadedAt == nil ||
		r.LogCoverage == nil || !r.LogCoverage.Complete {
		t.Fatalf("run: %+v coverage %+v", r, r.LogCoverage)
	}
	// The logs are fixed: uploading them again is harmless, other bytes are refused.
	if _, err := a.Client.PutLogs(ctx, claim.ID, logs); err != nil {
		t.Fatalf("repeat upload: %v", err)
	}
	if _, err := a.Client.PutLogs(ctx, claim.ID, append(logs, logs...)); dotlab.ErrorCode(err) != dotlab.ECONFLICT {
		t.Fatalf("replacing the logs: %v", err)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// bulkyEngine reruns like fakeEngine, but its analysis also wrote
// `files` more output files (20000 make a body over the server's 1 MiB limit) and
// left notes (which may be text the server refuses as public text).
type bulkyEngine struct {
	files int
	notes string
}

func (e bulkyEngine) Rerun(ctx context.Context, m *dotlab.Manifest, outDir string) (*runner.Record, error) {
	rec, err := fakeEngine{}.Rerun(ctx, m, outDir)
	if err != nil {
		return nil, err
	}
	for i := 0; i < e.files; i++ {
		rec.Body.OutputHashes[fmt.Sprintf("figures/panel-%05d.eps", i)] = strings.Repeat("3", 64)
	}
	rec.Body.Notes = e.notes
	return rec, nil
}

// TestChallengeRefusedForAnalysisTextIsRetried: a challenge the server
// refuses for what the analysis controls (notes that look like a key) is
// posted again without it, as a run is (publish), and one whose analysis
// wrote 20,000 files sends them as an output listing and keeps every hash:
// otherwise a package that writes many files would make every honest
// challenge of its run impossible.
func TestChallengeRefusedForAnalysisTextIsRetried(t *testing.T) {
	ctx := context.Background()
	for _, e := range []bulkyEngine{{files: 20000}, {notes: "warning: key AKIAZ7Q4MX2LPJRT3WKD"}} {
		c := testServer(t)
		sub, run := submitterAndRunner(t, c)
		ch, _ := c.Register(ctx, dotlab.NewAgent{Name: "challenger", Operator: "test"})
		claim, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON("bulky"), "statistics")
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{Client: c.WithKey(run.APIKey), Engine: fakeEngine{}, WorkDir: t.TempDir()}
		if _, err := a.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		cy := &Agent{Client: c.WithKey(ch.APIKey), Engine: e, WorkDir: t.TempDir()}
		if id, err := cy.ChallengeOnce(ctx); err != nil || id != claim.ID {
			t.Fatalf("%+v: ChallengeOnce: %q %v", e.files, id, err)
		}
		list, err := c.Challenges(ctx, claim.ID)
		if err != nil || len(list) != 1 {
			t.Fatalf("%+v: challenges: %+v %v", e.files, list, err)
		}
		if got := list[0]; strings.Contains(got.Notes, "AKIA") || !got.Agrees {
			t.Fatalf("challenge %+v", got)
		}
		if got := list[0]; e.files > 0 && (got.OutputListing == nil || got.OutputListing.Count < e.files || strings.Contains(got.Notes, "left out")) {
			t.Fatalf("%d files: every hash must be kept in an output listing: %+v", e.files, got)
		}
	}
}

// testServer starts a real server (httpapi on a SQLite file) and returns
// an unauthenticated client. A loopback server over plain
// http is a private deployment: the agent's logs_uri (this server's own
// logs URL) is http://127.0.0.1, so it takes private URLs.
func testServer(t *testing.T) *client.Client {
	t.Helper()
	srv, _ := servertest.API(t, httpapi.Config{Store: sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{}), AllowPrivateURLs: true})
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// submitterAndRunner registers a submitter and a runner on c (unsigned).
func submitterAndRunner(t *testing.T, c *client.Client) (sub, run *apiv1.AgentCreated) {
	t.Helper()
	ctx := context.Background()
	sub, err := c.Register(ctx, dotlab.NewAgent{Name: "submitter", Operator: "test"})
	if err == nil {
		run, err = c.Register(ctx, dotlab.NewAgent{Name: "runner", Operator: "test"})
	}
	if err != nil {
		t.Fatal(err)
	}
	return sub, run
}

// gateEngine reruns like fakeEngine, but each rerun waits at the gate
// until as many reruns as the gate holds are running at once.
type gateEngine struct {
	running chan struct{}
	release chan struct{}
}

func (e gateEngine) Rerun(ctx context.Context, m *dotlab.Manifest, outDir string) (*runner.Record, error) {
	e.running <- struct{}{}
	select {
	case <-e.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return fakeEngine{}.Rerun(ctx, m, outDir)
}

// TestRunLoopParallelOnce: with --parallel 3 and --once, the runner's loop
// takes the two jobs the pool has (both reruns running at once: the
// engine lets neither finish until both started), stops at the draw that
// finds none, publishes both and returns; with a key the server refuses
// it returns the 401 at once.
func TestRunLoopParallelOnce(t *testing.T) {
	ctx := context.Background()
	c := testServer(t)
	sub, run := submitterAndRunner(t, c)
	var ids []string
	for _, title := range []string{"parallel a", "parallel b"} {
		cl, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON(title), "statistics")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cl.ID)
	}
	e := gateEngine{running: make(chan struct{}, 2), release: make(chan struct{})}
	go func() {
		<-e.running
		<-e.running // both reruns are running
		close(e.release)
	}()
	a := &Agent{Client: c.WithKey(run.APIKey), Engine: e, WorkDir: t.TempDir()}
	done := make(chan error, 1)
	go func() { done <- a.RunLoop(ctx, LoopOptions{Parallel: 3, Once: true}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunLoop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunLoop did not return: the two reruns never ran at once")
	}
	for _, id := range ids {
		if cv, err := c.Claim(ctx, id); err != nil || cv.RunID == "" {
			t.Fatalf("claim %s not published: %+v %v", id, cv, err)
		}
	}
	bad := &Agent{Client: c.WithKey("dlk_revoked"), Engine: fakeEngine{}, WorkDir: t.TempDir()}
	if err := bad.RunLoop(ctx, LoopOptions{Parallel: 2, Poll: time.Hour}); !client.IsUnauthorized(err) {
		t.Fatalf("RunLoop with a refused key: %v, want the 401", err)
	}
}
