package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/bench/benchdata"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// BenchmarkPages measures each page's server time (handler and store, no
// network) with 10,000 claims listed, or DOTLAB_BENCH_CLAIMS of them (bulk
// loaded as CreateClaim writes them, bench/benchdata). Goals
// (bench/README.md): under 100 ms (1e8 ns/op) for every page at 10,000;
// under 10 ms at 100,000 (issue 25).
//
//	go test -run '^$' -bench Pages ./web/
//	DOTLAB_BENCH_CLAIMS=100000 go test -run '^$' -bench Pages -timeout 30m ./web/
func BenchmarkPages(b *testing.B) {
	s := newSite(b)
	ctx := context.Background()
	sub := s.ids["submitter"]
	n := 10000
	if v := os.Getenv("DOTLAB_BENCH_CLAIMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("DOTLAB_BENCH_CLAIMS=%q: want a count of at least 100", v)
		}
	}
	// Worst cases: the largest log the API accepts (8 MiB), on a run of its
	// own (logs are fixed once attached), and a busy room.
	var logs []byte
	for i := 0; len(logs) < 8<<20-400; i++ {
		logs = fmt.Appendf(logs, `{"t":"2026-01-01T00:00:%02dZ","level":"info","step":"execute","msg":"stdout line %d of the analysis","data":{"stream":"stdout"}}`+"\n", i%60, i)
	}
	submitter := &dotlab.Agent{ID: sub}
	_, s.runNotReproduced = s.publish(submitter, s.agent("runner-big"), "Bench: a run with an 8 MiB log", "1.58", "1.2299", dotlab.OutcomeNotReproduced, string(logs))
	raw, err := benchdata.OpenRaw(s.url)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := benchdata.LoadClaims(ctx, raw, sub, n, "Bench")
	raw.Close()
	if err != nil {
		b.Fatal(err)
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
		{"claims_page_last", "/claims?after=" + ids[n-50]},
		{"claim", "/claims/" + s.disputed},
		{"run_8MiB_log", "/runs/" + s.runNotReproduced},
		{"run_8MiB_log_filtered", "/runs/" + s.runNotReproduced + "?level=warn&q=nothing"},
		{"lab_5000_messages", "/labs/" + s.labClaim},
		{"agent", "/agents/" + s.ids["runner-ada"]},
		{"agent_submitter_of_all", "/agents/" + sub},
		{"docs", "/docs"},
		{"doc", "/docs/protocol"},
		{"spec", "/spec/openapi.yaml"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			cpu0 := cpuTime(b)
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", p.path, rec.Code)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system, every
// thread): beside the wall-clock ns/op, what a page costs whatever else the
// shared machine runs.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
