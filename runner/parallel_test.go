package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/sqlstore"
)

// holdings watches, on the server side, how many jobs one agent holds
// accepted and not yet published, and whether it ever drew while holding
// the most it may.
type holdings struct {
	mu            sync.Mutex
	held, most    int
	drewWhileFull int
	limit         int
}

// wrap counts the answers of next (every draw), accept (200) and runs (201).
func (h *holdings) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		if r.Method == "GET" && r.URL.Path == "/api/v1/jobs/next" {
			h.mu.Lock()
			if h.held >= h.limit {
				h.drewWhileFull++
			}
			h.mu.Unlock()
		}
		next.ServeHTTP(rec, r)
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/accept") && rec.status == 200:
			h.held++
			h.most = max(h.most, h.held)
		case r.Method == "POST" && r.URL.Path == "/api/v1/runs" && rec.status == 201:
			h.held--
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// TestRunLoopParallel: `dotlab runner --parallel 2`'s loop with three
// claims in the pool, real runc sandboxes and a real server on SQLite:
// all three are rerun and published, two of the sandboxed commands run at
// the same time (their execute log lines overlap), never three, and the
// agent never holds more than two accepted jobs nor draws while it holds
// two.
func TestRunLoopParallel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	lc, err := leakcheck.New()
	if err != nil {
		t.Fatal(err)
	}
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	api, err := httpapi.New(httpapi.Config{Store: db, Leaks: lc, AllowPrivateURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	h := &holdings{limit: 2}
	srv := httptest.NewServer(h.wrap(api))
	t.Cleanup(func() { api.Close(); srv.Close() })
	c, _ := client.New(srv.URL, "")
	sub, err := c.Register(ctx, dotlab.NewAgent{Name: "submitter", Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := c.Register(ctx, dotlab.NewAgent{Name: "runner", Operator: "test"})
	claims := map[string]bool{}
	for i := 0; i < 3; i++ {
		// Each command sleeps long enough for two to be seen side by side.
		m := f.published(fmt.Sprintf("sleep 2; echo v %d", i), target("v", fmt.Sprint(i), &dotlab.TargetSource{Stream: "stdout", Regex: `v (\d+)`}))
		m.Title = fmt.Sprintf("parallel %d", i)
		m.Datasets = []dotlab.Dataset{}
		claims[listManifest(t, db, sub.ID, m).ID] = true
	}
	var mu sync.Mutex
	var said []string
	work := t.TempDir()
	a := &agent.Agent{Client: c.WithKey(run.APIKey), Engine: f.r, WorkDir: work, Logf: func(format string, args ...any) {
		mu.Lock()
		said = append(said, fmt.Sprintf(format, args...))
		mu.Unlock()
	}}
	if err := a.RunLoop(ctx, agent.LoopOptions{Parallel: 2, Poll: 50 * time.Millisecond, StopOnError: true, Idle: func() bool { return true }}); err != nil {
		t.Fatalf("RunLoop: %v (agent said %q)", err, said)
	}
	for id := range claims {
		cv, err := c.Claim(ctx, id)
		if err != nil || cv.RunID == "" || cv.State != dotlab.StateChallengeWindow {
			t.Fatalf("claim %s: %+v %v (agent said %q)", id, cv, err, said)
		}
	}
	spans := executeSpans(t, work)
	if len(spans) != 3 {
		t.Fatalf("%d sandboxed commands logged, want 3", len(spans))
	}
	if most := mostAtOnce(spans); most != 2 {
		t.Errorf("at most %d sandboxed commands ran at once, want 2: %v", most, spans)
	}
	if h.most != 2 || h.drewWhileFull != 0 {
		t.Errorf("the agent held up to %d accepted jobs (want 2) and drew %d times while holding 2 (want 0)", h.most, h.drewWhileFull)
	}
}

// span is when one rerun's sandboxed command ran, from its run's logs.jsonl.
type span struct{ from, to time.Time }

// executeSpans reads, from each rerun directory under work, the times of
// the "execute" log lines that start the command and say how it exited.
func executeSpans(t *testing.T, work string) []span {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(work, "run-*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []span
	for _, d := range dirs {
		var s span
		for _, e := range readLogs(t, d) {
			at, err := time.Parse(time.RFC3339Nano, e.T)
			if err != nil {
				t.Fatalf("%s: log time %q: %v", d, e.T, err)
			}
			switch {
			case e.Step == "execute" && strings.HasPrefix(e.Msg, "command: "):
				s.from = at
			case e.Step == "execute" && strings.HasPrefix(e.Msg, "command exited"):
				s.to = at
			}
		}
		if s.from.IsZero() || s.to.Before(s.from) {
			data, _ := os.ReadFile(filepath.Join(d, "logs.jsonl"))
			t.Fatalf("%s: no execute span in the log:\n%s", d, data)
		}
		out = append(out, s)
	}
	return out
}

// mostAtOnce is the largest number of spans open at one instant.
func mostAtOnce(spans []span) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.from, 1}, edge{s.to, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta // an end before a start at the same instant
		}
		return edges[i].at.Before(edges[j].at)
	})
	open, most := 0, 0
	for _, e := range edges {
		open += e.delta
		most = max(most, open)
	}
	return most
}
