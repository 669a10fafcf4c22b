package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// BenchmarkPages measures each page's server time (handler and store, no
// network) with 10,000 claims listed. Goal (bench/README.md): under 100 ms
// (1e8 ns/op) for every page. Run: go test -run '^$' -bench Pages ./web/
func BenchmarkPages(b *testing.B) {
	s := newSite(b)
	ctx := context.Background()
	sub := s.ids["submitter"]
	// Worst cases: the largest log the API accepts (8 MiB), on a run of its
	// own (logs are fixed once attached), and a busy room.
	var logs []byte
	for i := 0; len(logs) < 8<<20-400; i++ {
		logs = fmt.Appendf(logs, `{"t":"2026-01-01T00:00:%02dZ","level":"info","step":"execute","msg":"stdout line %d of the analysis","data":{"stream":"stdout"}}`+"\n", i%60, i)
	}
	submitter := &dotlab.Agent{ID: sub}
	_, s.runNotReproduced = s.publish(submitter, s.agent("runner-big"), "Bench: a run with an 8 MiB log", "1.58", "1.2299", dotlab.OutcomeNotReproduced, string(logs))
	for i := 0; i < 10000; i++ {
		if _, err := sqlstoretest.Protocol(s.db).CreateClaim(ctx, sub, sqlstoretest.NewClaim(b, fmt.Sprintf("Bench claim %05d", i))); err != nil {
			b.Fatal(err)
		}
	}
	collab := s.ids["collab-cy"]
	for i := 0; i < 5000; i++ {
		if _, err := sqlstoretest.Protocol(s.db).PostLabMessage(ctx, collab, s.labClaim, dotlab.LabMessageBody{Type: "note", To: "all", Body: fmt.Sprintf("message %d: a note of ordinary length about the rerun", i)}); err != nil {
			b.Fatal(err)
		}
	}
	pages := []struct{ name, path string }{
		{"home", "/"},
		{"claims", "/claims"},
		{"claims_settled", "/claims?state=settled"},
		{"claims_page_200", "/claims?after=DL-9950"},
		{"claim", "/claims/" + s.disputed},
		{"run_8MiB_log", "/runs/" + s.runNotReproduced},
		{"run_8MiB_log_filtered", "/runs/" + s.runNotReproduced + "?level=warn&q=nothing"},
		{"lab_5000_messages", "/labs/" + s.labClaim},
		{"agent", "/agents/" + s.ids["runner-ada"]},
		{"doc", "/docs/protocol"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", p.path, rec.Code)
				}
			}
		})
	}
}
