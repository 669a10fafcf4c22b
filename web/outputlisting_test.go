package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// TestRunPageLinksTheOutputListing: a run that sent its 5,000 output
// hashes as an output listing beside it shows, under its inline outputs,
// the listing's link, count, length and SHA-256.
func TestRunPageLinksTheOutputListing(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	sub, runner := s.agent("sub-listing"), s.agent("runner-listing")
	id := runtimeClaim(t, s, sub, runner, "A package writing 5,000 files")
	hashes := map[string]string{"results.json": strings.Repeat("2", 64)}
	for i := range 5000 {
		hashes[fmt.Sprintf("out/f%05d", i)] = strings.Repeat("3", 64)
	}
	listing, pin, err := dotlab.EncodeOutputListing(hashes)
	if err != nil {
		t.Fatal(err)
	}
	p := sqlstoretest.Protocol(s.db)
	must(p.PutOutputListing(ctx, runner.ID, id, listing))
	body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
	body.OutputListing = &pin
	run := must(p.PublishRun(ctx, runner, body, nil))
	code, _, page := s.get("/runs/"+run.ID, "text/html")
	if code != http.StatusOK {
		t.Fatalf("run page: %d", code)
	}
	contains(t, "run page", html.UnescapeString(page), `href="/api/v1/runs/`+run.ID+`/outputs"`, "5001 outputs", pin.SHA256)
}
