package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestServeLifecycleRealClock runs the server in-process with
// second-long windows on the wall clock: a reproduced run settles when its
// one-second challenge window closes, by the settlement loop alone; then the
// server shuts down gracefully on cancel.
func TestServeLifecycleRealClock(t *testing.T) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			dbURL := sqlstoretest.URL(t, e)
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan string, 1)
			served := make(chan error, 1)
			w := dotlab.Windows{Accept: time.Second, Publish: 2 * time.Second, Challenge: time.Second, Quorum: 3}
			cfg := Config{Addr: "127.0.0.1:0", DB: dbURL, Windows: w, SettleEvery: 100 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: ready}
			go func() { served <- Run(ctx, cfg) }()
			var base string
			select {
			case addr := <-ready:
				base = "http://" + addr + "/api/v1"
			case err := <-served:
				t.Fatal(err)
			}
			call := func(method, path, key string, body any, out any) int {
				b, _ := json.Marshal(body)
				req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				if out != nil {
					json.NewDecoder(res.Body).Decode(out)
				}
				return res.StatusCode
			}
			var sub, run apiv1.AgentCreated
			call("POST", "/agents", "", dotlab.NewAgent{Name: "s", Operator: "t"}, &sub)
			call("POST", "/agents", "", dotlab.NewAgent{Name: "r", Operator: "t"}, &run)
			var c apiv1.ClaimView
			if st := call("POST", "/claims", sub.APIKey, map[string]string{"manifest": string(sqlstoretest.ManifestJSON("real clock")), "field": "statistics"}, &c); st != 201 {
				t.Fatalf("submit: %d", st)
			}
			// An ignored offer returns to the pool after the 1 s accept window.
			var ignored apiv1.AgentCreated
			call("POST", "/agents", "", dotlab.NewAgent{Name: "ignores", Operator: "t"}, &ignored)
			if st := call("GET", "/jobs/next", ignored.APIKey, nil, nil); st != 200 {
				t.Fatalf("first offer: %d", st)
			}
			deadline := time.Now().Add(10 * time.Second)
			for call("GET", "/jobs/next", run.APIKey, nil, nil) != 200 {
				if time.Now().After(deadline) {
					t.Fatal("ignored offer never returned to the pool")
				}
				time.Sleep(100 * time.Millisecond)
			}
			call("POST", "/jobs/"+c.ID+"/accept", run.APIKey, nil, nil)
			if st := call("POST", "/runs", run.APIKey, sqlstoretest.RunBody(c.ID, "1.58", "1.17", dotlab.OutcomeReproduced), nil); st != 201 {
				t.Fatalf("run: %d", st)
			}
			for {
				call("GET", "/claims/"+c.ID, "", nil, &c)
				if c.State == dotlab.StateSettled {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("not settled by the clock: state %s", c.State)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if c.Outcome != dotlab.OutcomeReproduced {
				t.Fatalf("outcome %s", c.Outcome)
			}
			checkLogServed(t, strings.TrimSuffix(base, "/api/v1"), c)
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Fatalf("shutdown: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("server did not shut down")
			}
			// The database closed cleanly and reopens with everything in it.
			db, err := sqlstore.Open(context.Background(), dbURL, sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			got, err := db.FindClaim(context.Background(), c.ID)
			if err != nil || got.State != dotlab.StateSettled {
				t.Fatalf("after restart: %v %v", got, err)
			}
		})
	}
}

// fakeSettler reports one changed claim per sweep and counts the sweeps.
type fakeSettler struct{ sweeps chan int }

func (f *fakeSettler) Settle(ctx context.Context) (dotlab.SettleReport, error) {
	n := len(f.sweeps)
	f.sweeps <- n
	return dotlab.SettleReport{ClaimsSettled: 1, Changed: []string{"DL-0001"}}, nil
}

// TestSettleLoopSweepsAtStartAndNotifies: the first sweep runs at once
// (before the first tick), every changed claim is notified, and the loop
// returns when its context ends.
func TestSettleLoopSweepsAtStartAndNotifies(t *testing.T) {
	f := &fakeSettler{sweeps: make(chan int, 100)}
	notified := make(chan string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		SettleLoop(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), f, time.Hour, func(id string) { notified <- id })
	}()
	select {
	case <-f.sweeps:
	case <-time.After(5 * time.Second):
		t.Fatal("no sweep at start")
	}
	if id := <-notified; id != "DL-0001" {
		t.Fatalf("notified %q", id)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop on cancel")
	}
}

func TestRunRefusesNoSettlementPeriod(t *testing.T) {
	if err := Run(context.Background(), Config{Addr: "127.0.0.1:0", DB: "sqlite::memory:"}); err == nil {
		t.Fatal("Run with SettleEvery 0: want an error")
	}
}

// checkLogServed: the server lists its log in /status, logged the
// settlement the clock made, and the claim and run pages cite their log
// entries with the checkpoint and the proof.
func checkLogServed(t *testing.T, root string, c apiv1.ClaimView) {
	t.Helper()
	get := func(path string) (int, string) {
		res, err := http.Get(root + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	var st apiv1.Status
	_, body := get("/api/v1/status")
	json.Unmarshal([]byte(body), &st)
	if st.Log == nil || !strings.HasPrefix(st.Log.VerifierKey, st.Log.Origin+"+") {
		t.Fatalf("status lists no log: %s", body)
	}
	if code, body := get("/api/v1/log/entries/settlement/" + c.ID); code != 200 || !strings.Contains(body, "inclusion_proof") {
		t.Fatalf("settlement entry: %d %s", code, body)
	}
	for _, page := range []string{"/claims/" + c.ID, "/runs/" + c.RunID} {
		code, body := get(page)
		if code != 200 || !strings.Contains(body, `id="log-entry"`) || !strings.Contains(body, "/api/v1/log/entries/") {
			t.Fatalf("%s shows no log entry (%d)", page, code)
		}
	}
	if code, body := get("/log/checkpoint"); code != 200 || !strings.HasPrefix(body, st.Log.Origin+"\n") {
		t.Fatalf("checkpoint: %d %q", code, body)
	}
}
