package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// recordSleeps makes c record its waits instead of sleeping.
func recordSleeps(c *Client) *[]time.Duration {
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	return &waits
}

func TestRetries(t *testing.T) {
	var calls atomic.Int32
	status := func(codes ...int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n := int(calls.Add(1)) - 1
			code := codes[min(n, len(codes)-1)]
			if code == 429 {
				w.Header().Set("Retry-After", "7")
			}
			w.WriteHeader(code)
			if code >= 400 {
				json.NewEncoder(w).Encode(apiv1.ErrorBody{Error: map[int]string{401: "unauthorized", 429: "rate_limited", 503: "unavailable", 500: "internal"}[code], Detail: []string{"x"}})
			} else {
				w.Write([]byte(`{"version":"v"}`))
			}
		}
	}
	cases := []struct {
		name   string
		codes  []int
		calls  int32
		waits  []time.Duration
		errStr string
	}{
		{"5xx retried with backoff then succeeds", []int{503, 500, 200}, 3, []time.Duration{500 * time.Millisecond, time.Second}, ""},
		{"5xx gives up after three retries", []int{500}, 4, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}, "internal"},
		{"429 honours Retry-After", []int{429, 200}, 2, []time.Duration{7 * time.Second}, ""},
		{"401 stops at once", []int{401, 200}, 1, nil, "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			srv := httptest.NewServer(status(tc.codes...))
			defer srv.Close()
			c, _ := New(srv.URL, "k")
			waits := recordSleeps(c)
			_, err := c.Status(context.Background())
			if got := dotlab.ErrorCode(err); got != tc.errStr {
				t.Fatalf("error %q (%v), want %q", got, err, tc.errStr)
			}
			if calls.Load() != tc.calls {
				t.Fatalf("%d calls, want %d", calls.Load(), tc.calls)
			}
			if len(*waits) != len(tc.waits) {
				t.Fatalf("waits %v, want %v", *waits, tc.waits)
			}
			for i := range tc.waits {
				if (*waits)[i] != tc.waits[i] {
					t.Fatalf("waits %v, want %v", *waits, tc.waits)
				}
			}
		})
	}
}

func TestAgainstRealServer(t *testing.T) {
	srv, _ := servertest.API(t, httpapi.Config{Store: sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})})
	ctx := context.Background()
	c, _ := New(srv.URL+"/api/v1/", "")
	sub, err := c.Register(ctx, dotlab.NewAgent{Name: "s", Operator: "o"})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := c.Register(ctx, dotlab.NewAgent{Name: "r", Operator: "o"})
	cs, cr := c.WithKey(sub.APIKey), c.WithKey(run.APIKey)
	v, err := cs.SubmitClaim(ctx, sqlstoretest.ManifestJSON("client"), "statistics")
	if err != nil || v.ID != "DL-0001" {
		t.Fatalf("submit: %v %v", v, err)
	}
	if _, err := cs.SubmitClaim(ctx, sqlstoretest.ManifestJSON("client"), "statistics"); dotlab.ErrorCode(err) != dotlab.EDUPLICATE {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := cs.NextJob(ctx); err != ErrNone {
		t.Fatalf("submitter next: %v", err)
	}
	j, err := cr.NextJob(ctx)
	if err != nil || j.ID != v.ID {
		t.Fatalf("next: %v %v", j, err)
	}
	raw, _ := cr.ClaimManifest(ctx, j.ID)
	if string(raw) != string(sqlstoretest.ManifestJSON("client")) {
		t.Fatal("manifest differs")
	}
	cr.Accept(ctx, j.ID)
	cr.JoinLab(ctx, j.ID, "runner")
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got := make(chan Event, 10)
	go cr.Follow(fctx, j.ID, "", func(e Event) error { got <- e; return nil })
	if _, err := cr.Post(ctx, j.ID, dotlab.LabMessageBody{Type: "note", To: "all", Body: "verifying inputs"}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-got:
			if e.Kind == "message" {
				return
			}
		case <-fctx.Done():
			t.Fatal("message never arrived on the stream")
		}
	}
}
