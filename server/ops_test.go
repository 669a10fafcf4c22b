package server

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// running is a server.Run in this process.
type running struct {
	t    *testing.T
	root string // http://HOST:PORT
	stop func() error
}

// startRun runs cfg (Addr, Logger and Ready filled in) until the test ends.
func startRun(t *testing.T, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	served := make(chan error, 1)
	cfg.Addr, cfg.Ready = "127.0.0.1:0", ready
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.SettleEvery == 0 {
		cfg.SettleEvery = 100 * time.Millisecond
	}
	go func() { served <- Run(ctx, cfg) }()
	r := &running{t: t}
	var once bool
	var err error
	r.stop = func() error {
		if !once {
			once = true
			cancel()
			err = <-served
		}
		return err
	}
	t.Cleanup(func() { r.stop() })
	select {
	case addr := <-ready:
		r.root = "http://" + addr
	case err := <-served:
		t.Fatal(err)
	}
	return r
}

// call sends a JSON request and decodes a JSON answer into out.
func (r *running) call(method, path, key string, body, out any) int {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.root+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			r.t.Fatalf("%s %s: %d, decoding: %v", method, path, res.StatusCode, err)
		}
	} else {
		io.Copy(io.Discard, res.Body)
	}
	return res.StatusCode
}

// scrape reads GET /metrics with Prometheus' own text parser.
func (r *running) scrape() map[string]*dto.MetricFamily {
	r.t.Helper()
	res, err := http.Get(r.root + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		r.t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		r.t.Fatalf("GET /metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// sample finds the series of fam whose labels include want (name=value,
// …) and returns its value: a counter's or gauge's value, a histogram's
// sample count. A missing series is 0.
func sample(fams map[string]*dto.MetricFamily, fam string, want ...string) float64 {
	f := fams[fam]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, w := range want {
			k, v, _ := strings.Cut(w, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// histogramSum is the sum of the histogram series of fam with labels want.
func histogramSum(fams map[string]*dto.MetricFamily, fam string, label string) float64 {
	k, v, _ := strings.Cut(label, "=")
	for _, m := range fams[fam].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				return m.Histogram.GetSampleSum()
			}
		}
	}
	return -1
}

// TestMetricsMove scrapes /metrics of a real server on SQLite and checks
// that each series moves with what it counts: requests by route pattern
// and status (never the raw path), latency histograms, the draw, the live
// event streams open, and how late the settlement clock settled a claim;
// and that /healthz, /readyz and /metrics are outside the rate limit
// while a 429 still counts under its route.
func TestMetricsMove(t *testing.T) {
	w := dotlab.Windows{Accept: time.Minute, Publish: time.Minute, Challenge: time.Second, Quorum: 3}
	r := startRun(t, Config{DB: sqlstoretest.URL(t, sqlstore.SQLite), Windows: w, AgentLimit: httpapi.RateLimit{PerSecond: 1000, Burst: 1000},
		AnonymousLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 8}, Version: "test-1"})
	before := r.scrape()
	for _, fam := range []string{"go_goroutines", "process_cpu_seconds_total", "dotlab_build_info", "dotlab_sse_subscribers"} {
		if before[fam] == nil {
			t.Errorf("no %s series", fam)
		}
	}
	if sample(before, "dotlab_build_info", "version=test-1") != 1 {
		t.Errorf("dotlab_build_info{version=test-1} missing")
	}
	var sub, run, idle apiv1.AgentCreated
	r.call("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: "s", Operator: "t"}, &sub)
	r.call("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: "r", Operator: "t"}, &run)
	r.call("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: "i", Operator: "t"}, &idle)
	var c apiv1.ClaimView
	if st := r.call("POST", "/api/v1/claims", sub.APIKey, map[string]string{"manifest": string(sqlstoretest.ManifestJSON("metrics")), "field": "statistics"}, &c); st != 201 {
		t.Fatalf("submit: %d", st)
	}
	const claimRoute = "route=GET /api/v1/claims/{id}"
	for _, key := range []string{sub.APIKey, sub.APIKey, sub.APIKey} { // keyed: the agent limit, not the address's
		r.call("GET", "/api/v1/claims/"+c.ID, key, nil, nil)
	}
	r.call("GET", "/api/v1/claims/DL-9999", sub.APIKey, nil, nil)
	if st := r.call("GET", "/api/v1/jobs/next", run.APIKey, nil, nil); st != 200 {
		t.Fatalf("draw: %d", st)
	}
	if st := r.call("GET", "/api/v1/jobs/next", idle.APIKey, nil, nil); st != 204 {
		t.Fatalf("empty draw: %d", st)
	}
	got := r.scrape()
	if n := sample(got, "dotlab_http_requests_total", claimRoute, "code=200") - sample(before, "dotlab_http_requests_total", claimRoute, "code=200"); n != 3 {
		t.Errorf("GET /claims/{id} 200s counted %v, want 3", n)
	}
	if n := sample(got, "dotlab_http_requests_total", claimRoute, "code=404"); n != 1 {
		t.Errorf("GET /claims/{id} 404s counted %v, want 1", n)
	}
	if n := sample(got, "dotlab_http_request_duration_seconds", claimRoute); n != 4 {
		t.Errorf("GET /claims/{id} latency samples %v, want 4", n)
	}
	if sample(got, "dotlab_job_draw_seconds", "result=offered") != 1 || sample(got, "dotlab_job_draw_seconds", "result=none") != 1 {
		t.Errorf("draws: offered %v none %v, want 1 and 1", sample(got, "dotlab_job_draw_seconds", "result=offered"), sample(got, "dotlab_job_draw_seconds", "result=none"))
	}
	for _, m := range got["dotlab_http_requests_total"].GetMetric() {
		for _, l := range m.Label {
			if strings.Contains(l.GetValue(), "DL-") {
				t.Errorf("a raw path reached a label: %s=%q", l.GetName(), l.GetValue())
			}
		}
	}
	checkStreamGauge(t, r, c.ID)
	checkSettlementLag(t, r, c.ID, run.APIKey)
	checkOutsideRateLimit(t, r)
}

// checkStreamGauge: dotlab_sse_subscribers is 1 while a stream is open and
// back to 0 once it closes.
func checkStreamGauge(t *testing.T, r *running, claimID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", r.root+"/api/v1/labs/"+claimID+"/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(res.Body).ReadString('\n'); !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream opened with %q", line)
	}
	if n := sample(r.scrape(), "dotlab_sse_subscribers"); n != 1 {
		t.Errorf("dotlab_sse_subscribers %v with one stream open, want 1", n)
	}
	cancel()
	res.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for sample(r.scrape(), "dotlab_sse_subscribers") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("dotlab_sse_subscribers stays above 0 after the stream closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkSettlementLag: a run published with a 1 s challenge window settles
// by the clock, and the lag of that settlement is observed: one sample,
// within a few sweeps (100 ms each) of its deadline.
func checkSettlementLag(t *testing.T, r *running, claimID, key string) {
	t.Helper()
	if st := r.call("POST", "/api/v1/jobs/"+claimID+"/accept", key, nil, nil); st != 200 {
		t.Fatalf("accept: %d", st)
	}
	if st := r.call("POST", "/api/v1/runs", key, sqlstoretest.RunBody(claimID, "1.58", "1.17", dotlab.OutcomeReproduced), nil); st != 201 {
		t.Fatalf("run: %d", st)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var c apiv1.ClaimView
		r.call("GET", "/api/v1/claims/"+claimID, key, nil, &c)
		if c.State == dotlab.StateSettled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %s", c.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := r.scrape()
	if n := sample(got, "dotlab_settlement_lag_seconds", "event=window_close"); n != 1 {
		t.Fatalf("settlement lag samples %v, want 1", n)
	}
	if lag := histogramSum(got, "dotlab_settlement_lag_seconds", "event=window_close"); lag < 0 || lag > 10 {
		t.Errorf("settlement lag %v s: want between 0 and a few sweeps", lag)
	}
	if sample(got, "dotlab_settlement_sweeps_total", "result=ok") < 2 {
		t.Errorf("sweeps not counted")
	}
}

// checkOutsideRateLimit: with the address's burst spent, /api/v1/status
// answers 429 (counted under its route pattern), while /healthz, /readyz
// and /metrics still answer.
func checkOutsideRateLimit(t *testing.T, r *running) {
	t.Helper()
	limited := 0
	for i := 0; i < 20; i++ {
		if r.call("GET", "/api/v1/status", "", nil, nil) == 429 {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("the anonymous limit never answered 429")
	}
	for i := 0; i < 20; i++ {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if st := r.call("GET", p, "", nil, nil); st != 200 {
				t.Fatalf("GET %s under the rate limit: %d", p, st)
			}
		}
	}
	if n := sample(r.scrape(), "dotlab_http_requests_total", "route=GET /api/v1/status", "code=429"); n != float64(limited) {
		t.Errorf("429s of GET /api/v1/status counted %v, want %d", n, limited)
	}
}

// TestReadyz: /readyz answers 200 with the schema version on a migrated
// database, and 503 naming the check once the database's schema is behind
// this binary's migrations, then once the version table cannot be read;
// /healthz stays 200 (the process is up) throughout.
func TestReadyz(t *testing.T) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			dbURL := sqlstoretest.URL(t, e)
			r := startRun(t, Config{DB: dbURL, Windows: dotlab.DefaultWindows})
			var ready Ready
			if st := r.call("GET", "/readyz", "", nil, &ready); st != 200 || ready.Status != "ready" || ready.Database != string(e) || ready.SchemaVersion < 6 {
				t.Fatalf("readyz: %d %+v", st, ready)
			}
			raw := rawDB(t, dbURL)
			if _, err := raw.Exec(`DELETE FROM goose_db_version WHERE version_id = $1`, ready.SchemaVersion); err != nil {
				t.Fatal(err)
			}
			var body apiv1.ErrorBody
			if st := r.call("GET", "/readyz", "", nil, &body); st != 503 || body.Error != "unavailable" || len(body.Detail) != 1 ||
				!strings.HasPrefix(body.Detail[0], "migrations: ") || !strings.Contains(body.Detail[0], "restart this server") {
				t.Fatalf("schema behind: %d %+v", st, body)
			}
			if _, err := raw.Exec(`DROP TABLE goose_db_version`); err != nil {
				t.Fatal(err)
			}
			body = apiv1.ErrorBody{}
			if st := r.call("GET", "/readyz", "", nil, &body); st != 503 || len(body.Detail) != 2 || !strings.HasPrefix(body.Detail[0], "database: ") {
				t.Fatalf("version table unreadable: %d %+v", st, body)
			}
			var h Health
			if st := r.call("GET", "/healthz", "", nil, &h); st != 200 || h.Status != "ok" {
				t.Fatalf("healthz: %d %+v", st, h)
			}
		})
	}
}

// rawDB opens dbURL with database/sql directly (sqlstore's drivers).
func rawDB(t *testing.T, dbURL string) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", dbURL
	if p, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		driver, dsn = "sqlite", sqlstore.SQLiteWriterDSN(p)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
