// Command api benchmarks DotLab's HTTP API side by side with its baselines,
// in one run, under 64 concurrent keep-alive clients (issue "Protocol
// server, part 1"):
//
//   - reads: GET /api/v1/claims/{id} (random ids among -claims listed
//     claims) against a bare net/http handler answering a JSON body of the
//     same bytes; target >= 0.5x the bare handler's requests/s. Load by wrk
//     (-t2 -c64 --latency, a Lua script picking the ids) when installed,
//     else by a Go load generator.
//   - writes: runner agents looping GET /jobs/next → POST /jobs/{id}/accept
//     → POST /runs against a bare insert loop writing the same rows with
//     plain SQL on the same kind of store; target >= 0.5x its cycles/s and
//     p99 < 20 ms per request.
//
// Usage:
//
//	go run ./bench/api [-db sqlite|postgres] [-duration 10s] [-claims 1000]
//
// It prints the machine, then one table. It exits non-zero only when the
// benchmark cannot run (or more than 1% of its requests fail), never for a
// missed target: those rows say MISSED. See bench/README.md.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dotlab/dotlab/bench/benchdata"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/translog"
)

// The targets.
const (
	readTarget  = 0.5                   // real reads/s over the bare handler's
	readGoal    = 0.8                   // the same, with the read cache (bench/README.md)
	readP99     = 20 * time.Millisecond // per read, with the read cache (bench/README.md)
	writeTarget = 0.6                   // real cycles/s over the bare insert loop's
	p99Target   = 20 * time.Millisecond // per write request
	maxErrRate  = 0.01                  // more failed requests than this is a failed run
)

type config struct {
	engine      sqlstore.Dialect
	pgURL       string
	d           time.Duration
	claims      int
	writeClaims int
	conns       int
	threads     int
	analyze     bool
	noWrk       bool
	profile     string
	skipWrites  bool
	skipReads   bool
	writeRate   float64
	notifyInTx  bool // -notify-in-tx
	outboxPairs int  // -outbox-pairs
	awaitLog    bool // -await-log
	balancer    bool
	dotlab      string
	pool        int
	pgWaits     bool
	lbLog       bool
}

func main() {
	var c config
	var db string
	flag.StringVar(&db, "db", "sqlite", "engine: sqlite (a file in a temp dir) or postgres (a fresh schema, dropped after)")
	flag.StringVar(&c.pgURL, "pg", sqlstoretest.PostgresURL(), "PostgreSQL server for -db postgres")
	flag.DurationVar(&c.d, "duration", 10*time.Second, "how long each row runs (whole seconds)")
	flag.IntVar(&c.claims, "claims", 1000, "claims listed for the read rows")
	flag.IntVar(&c.writeClaims, "write-claims", 0, "funded claims loaded for each write row (0: enough for -duration, 6,000 a second)")
	flag.IntVar(&c.conns, "c", 64, "concurrent keep-alive connections (clients)")
	flag.IntVar(&c.threads, "t", 2, "wrk threads")
	flag.BoolVar(&c.analyze, "analyze", false, "run ANALYZE after loading claims (sqlstore never does; shows the draw with planner statistics)")
	flag.BoolVar(&c.noWrk, "no-wrk", false, "use the Go load generator for reads even when wrk is installed")
	flag.StringVar(&c.profile, "profile", "", "directory to write CPU profiles of the real-API rows to (reads.pprof, writes.pprof)")
	flag.BoolVar(&c.skipWrites, "reads-only", false, "run the read rows only")
	flag.BoolVar(&c.skipReads, "writes-only", false, "skip the read rows")
	flag.BoolVar(&c.balancer, "balancer", false, "also run the write load against dotlab serve processes: one direct, one through HAProxy and (PostgreSQL) two through HAProxy")
	flag.StringVar(&c.dotlab, "dotlab", "", "the dotlab binary for -balancer (default: go build ./cmd/dotlab into a temp dir)")
	flag.IntVar(&c.pool, "pool", sqlstore.DefaultPoolSize, "PostgreSQL connections per server process for -balancer (pool_max_conns)")
	flag.BoolVar(&c.lbLog, "lb-log", false, "-balancer: keep HAProxy's request log on (one line a request to a file, as the cluster tests have it)")
	flag.BoolVar(&c.pgWaits, "pg-waits", false, "sample pg_stat_activity during each write row and print where the backends' time goes (PostgreSQL)")
	flag.Float64Var(&c.writeRate, "write-rate", 0, "pace the API write row at this many cycles/s in all (0: back to back, as fast as it goes); for latency below saturation, no ratio")
	flag.BoolVar(&c.notifyInTx, "notify-in-tx", false, "PostgreSQL: the API write row announces with pg_notify inside each write transaction (the path before the outbox, sqlstore.Options.NotifyInTx)")
	flag.BoolVar(&c.awaitLog, "await-log", false, "with the write rows: also run the bare loop + log entries and the API row with every logged write waiting after its commit for its integration (sqlstore.Options.AwaitLog: the path before writes answered at their commit)")
	flag.IntVar(&c.outboxPairs, "outbox-pairs", 0, "PostgreSQL, with the write rows: then run the API write row 2N more times, with the outbox and with pg_notify in each write tx, in the order ABBA ABBA (a changing load weighs on both alike)")
	flag.Parse()
	c.engine = sqlstore.Dialect(db)
	c.d = c.d.Round(time.Second)
	if c.d < time.Second {
		c.d = time.Second
	}
	if c.writeClaims == 0 {
		c.writeClaims = 6000 * int(c.d.Seconds())
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/api:", err)
		os.Exit(1)
	}
}

// row is one line of the table.
type row struct {
	group, name string
	r           result
	unit        string // "req/s" or "cycles/s"
	ratio       float64
	target      string
	met         *bool
}

func run(c config) error {
	ctx := context.Background()
	st, err := newStores(c.engine, c.pgURL)
	if err != nil {
		return err
	}
	defer st.close()
	if c.profile != "" {
		if err := os.MkdirAll(c.profile, 0o755); err != nil {
			return err
		}
	}
	leaks, err := leakcheck.New()
	if err != nil {
		return err
	}
	var rows []row
	if !c.skipReads {
		if rows, err = readRows(ctx, c, st, leaks); err != nil {
			return err
		}
	} else {
		machine(c, "", string(c.engine))
	}
	var kinds []kindLatency
	if !c.skipWrites {
		var w []row
		w, kinds, err = writeRows(ctx, c, st, leaks)
		if err != nil {
			return err
		}
		rows = append(rows, w...)
		if c.outboxPairs > 0 && c.engine == sqlstore.Postgres {
			p, err := outboxPairs(ctx, c, st, leaks, c.outboxPairs)
			if err != nil {
				return err
			}
			rows = append(rows, p...)
		}
	}
	if c.balancer {
		b, err := balancerRows(ctx, c, st)
		if err != nil {
			return err
		}
		rows = append(rows, b...)
	}
	printTable(rows)
	if kinds != nil {
		fmt.Println()
		fmt.Println("real write requests (p50 / p99):")
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		p99OK := true
		for _, k := range kinds {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", k.name, ms(k.p50), ms(k.p99))
			p99OK = p99OK && k.p99 < p99Target
		}
		fmt.Fprintf(tw, "  p99 < %s on every request\t\t\t%s\n", ms(p99Target), verdict(p99OK))
		tw.Flush()
	}
	return checkErrors(rows)
}

// readRows measures GET /api/v1/claims/{id} on a store with c.claims
// listed claims against a bare handler answering the same bytes, under the
// same load.
func readRows(ctx context.Context, c config, st *stores, leaks *leakcheck.Checker) ([]row, error) {
	tmp, err := os.MkdirTemp("", "dotlab-bench-wrk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	wrk := ""
	if p, err := exec.LookPath("wrk"); err == nil && !c.noWrk {
		wrk = p
	}
	reads, err := openLoaded(ctx, st, "reads", c.claims, c.analyze)
	if err != nil {
		return nil, err
	}
	defer reads.close()
	machine(c, wrk, st.engineVersion(ctx, reads.raw.DB))
	api, err := newAPI(reads.db, leaks, 0)
	if err != nil {
		return nil, err
	}
	defer api.Close()
	uncached, err := newAPI(reads.db, leaks, -1)
	if err != nil {
		return nil, err
	}
	defer uncached.Close()
	body, err := sampleClaim(api)
	if err != nil {
		return nil, err
	}
	load := readLoad{wrk: wrk, conns: c.conns, threads: c.threads, d: c.d, claims: c.claims, tmp: tmp}
	loadName := "Go load generator"
	if wrk != "" {
		loadName = fmt.Sprintf("wrk -t%d -c%d", c.threads, c.conns)
	}
	fmt.Printf("reads: %s, %s per row, %d-byte claim view\n", loadName, c.d, len(body))
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	bareR, err := measure("  bare handler", bare, load, "")
	if err != nil {
		return nil, err
	}
	stopSettle := settleLoop(reads.db)
	realR, err := measure("  real API (read cache)", api, load, profilePath(c.profile, "reads.pprof"))
	var noCacheR result
	if err == nil {
		noCacheR, err = measure("  real API (no read cache)", uncached, load, "")
	}
	stopSettle()
	if err != nil {
		return nil, err
	}
	r, rn := ratio(realR.rate(), bareR.rate()), ratio(noCacheR.rate(), bareR.rate())
	ok := r >= readTarget && realR.p99 < readP99
	okN := rn >= readTarget
	fmt.Printf("reads with the cache: %.2fx the bare handler (target >= %.1fx %s, goal %.1fx %s); p99 %s (target < %s %s; the bare handler's own p99 %s)\n",
		r, readTarget, verdict(r >= readTarget), readGoal, verdict(r >= readGoal), ms(realR.p99), ms(readP99), verdict(realR.p99 < readP99), ms(bareR.p99))
	return []row{
		{group: "reads", name: fmt.Sprintf("bare net/http handler (%d-byte body)", len(body)), r: bareR, unit: "req/s"},
		{name: fmt.Sprintf("GET /claims/{id} (%s, %d claims), read cache", c.engine, c.claims), r: realR, unit: "req/s",
			ratio: r, target: fmt.Sprintf(">= %.1fx, p99 < %s", readTarget, ms(readP99)), met: &ok},
		{name: fmt.Sprintf("GET /claims/{id} (%s, %d claims), no read cache", c.engine, c.claims), r: noCacheR, unit: "req/s",
			ratio: rn, target: fmt.Sprintf(">= %.1fx", readTarget), met: &okN},
	}, nil
}

// writeRows measures the runner cycle through the API against the bare
// insert loop, each on its own store loaded alike with c.writeClaims funded
// claims, and returns the per-request latencies of the API row.
func writeRows(ctx context.Context, c config, st *stores, leaks *leakcheck.Checker) ([]row, []kindLatency, error) {
	fmt.Printf("writes: %d clients, %s per row, %d funded claims per store\n", c.conns, c.d, c.writeClaims)
	bareStore, err := openLoaded(ctx, st, "writes_bare", c.writeClaims, c.writeAnalyze())
	if err != nil {
		return nil, nil, err
	}
	defer bareStore.close()
	agents, _, err := makeAgents(ctx, bareStore.db, c.conns)
	if err != nil {
		return nil, nil, err
	}
	fmt.Println("  bare insert loop …")
	stopWaits := st.waits(c.pgWaits)
	bareW, err := runBareWrites(bareStore.raw, nil, false, agents, bareStore.ids, c.d)
	stopWaits("bare insert loop")
	if err != nil {
		return nil, nil, err
	}
	bareStore.close()
	bareLogW, err := bareWithLog(ctx, c, st, false)
	if err != nil {
		return nil, nil, err
	}
	var awaitRows []row
	if c.awaitLog {
		if awaitRows, err = awaitingWrites(ctx, c, st, leaks); err != nil {
			return nil, nil, err
		}
	}

	realW, err := apiWrites(ctx, c, st, leaks, "writes_api", sqlstore.Options{NotifyInTx: c.notifyInTx}, profilePath(c.profile, "writes.pprof"), c.writeRate)
	if err != nil {
		return nil, nil, err
	}
	var inTxW result
	inTx := c.engine == sqlstore.Postgres && c.writeRate == 0 && !c.notifyInTx
	if inTx { // the same minutes: the outbox against pg_notify in every write transaction
		if inTxW, err = apiWrites(ctx, c, st, leaks, "writes_api_notify_in_tx", sqlstore.Options{NotifyInTx: true}, "", 0); err != nil {
			return nil, nil, err
		}
	}
	var noLogW, noLogInTxW result
	if c.writeRate == 0 {
		if noLogW, err = apiWrites(ctx, c, st, leaks, "writes_api_nolog", sqlstore.Options{NoLog: true, NotifyInTx: c.notifyInTx}, "", 0); err != nil {
			return nil, nil, err
		}
	}
	if inTx {
		if noLogInTxW, err = apiWrites(ctx, c, st, leaks, "writes_api_nolog_notify_in_tx", sqlstore.Options{NoLog: true, NotifyInTx: true}, "", 0); err != nil {
			return nil, nil, err
		}
	}
	rows := []row{{group: "writes", name: "bare insert loop (same rows, 3 tx)", r: bareW, unit: "cycles/s"},
		{name: "bare insert loop + log entries (the API's rows)", r: bareLogW, unit: "cycles/s"}}
	for _, a := range awaitRows {
		a.ratio = ratio(a.r.rate(), bareW.rate())
		rows = append(rows, a)
	}
	if c.writeRate > 0 {
		// Paced: the rate is the schedule's, so no ratio.
		return append(rows, row{name: fmt.Sprintf("next+accept+runs (%s), paced at %g/s", c.engine, c.writeRate), r: realW, unit: "cycles/s"}),
			realW.perKind, nil
	}
	r := ratio(realW.rate(), bareW.rate())
	ok := r >= writeTarget
	if inTx {
		rows = append(rows, row{name: "next+accept+runs, pg_notify in each write tx (no outbox)", r: inTxW, unit: "cycles/s", ratio: ratio(inTxW.rate(), bareW.rate()), target: "vs bare loop"})
	}
	rows = append(rows, row{name: fmt.Sprintf("next+accept+runs (%s)", c.engine), r: realW, unit: "cycles/s",
		ratio: r, target: fmt.Sprintf(">= %.1fx", writeTarget), met: &ok},
		row{name: "  the same, vs the bare loop + log entries", r: realW, unit: "cycles/s", ratio: ratio(realW.rate(), bareLogW.rate()), target: "(no target)"},
		row{name: "next+accept+runs, logging off (NoLog)", r: noLogW, unit: "cycles/s", ratio: ratio(noLogW.rate(), bareW.rate()), target: "vs bare loop"})
	if inTx {
		rows = append(rows, row{name: "  logging off, pg_notify in each write tx (no outbox)", r: noLogInTxW, unit: "cycles/s", ratio: ratio(noLogInTxW.rate(), bareW.rate()), target: "vs bare loop"})
	}
	return rows, realW.perKind, nil
}

// apiWrites runs the real write load against the API (in this process) on
// a fresh store named name opened with opt, with the settlement clock
// running, CPU-profiled into profile ("" for none).
func apiWrites(ctx context.Context, c config, st *stores, leaks *leakcheck.Checker, name string, opt sqlstore.Options, profile string, rate float64) (result, error) {
	store, err := openLoadedWith(ctx, st, name, c.writeClaims, c.writeAnalyze(), opt)
	if err != nil {
		return result{}, err
	}
	defer store.close()
	_, keys, err := makeAgents(ctx, store.db, c.conns)
	if err != nil {
		return result{}, err
	}
	api, err := newAPI(store.db, leaks, 0)
	if err != nil {
		return result{}, err
	}
	defer api.Close()
	srv, err := serve(api)
	if err != nil {
		return result{}, err
	}
	label := "real API"
	if opt.NoLog {
		label += ", logging off"
	}
	if opt.NotifyInTx {
		label += ", pg_notify in the write tx"
	}
	fmt.Printf("  %s …\n", label)
	stopProfile, err := startProfile(profile)
	if err != nil {
		return result{}, err
	}
	stopSettle := settleLoop(store.db)
	stopWaits := st.waits(c.pgWaits)
	w, err := runRealWrites(srv.url, keys, c.d, rate)
	stopWaits(label)
	printSequencer(ctx, store.db.Log())
	stopSettle()
	stopProfile()
	if serr := srv.stop(); err == nil {
		err = serr
	}
	return w, err
}

// awaitingWrites runs the bare loop + log entries and the API write row
// with every logged write waiting after its commit for its integration
// (sqlstore.Options.AwaitLog), in the same minutes as the rows without.
func awaitingWrites(ctx context.Context, c config, st *stores, leaks *leakcheck.Checker) ([]row, error) {
	bare, err := bareWithLog(ctx, c, st, true)
	if err != nil {
		return nil, err
	}
	api, err := apiWrites(ctx, c, st, leaks, "writes_api_await", sqlstore.Options{AwaitLog: true, NotifyInTx: c.notifyInTx}, "", c.writeRate)
	if err != nil {
		return nil, err
	}
	return []row{{name: "bare insert loop + log entries, each write awaiting its batch (before)", r: bare, unit: "cycles/s", target: "vs bare loop"},
		{name: "next+accept+runs, each write awaiting its batch (before)", r: api, unit: "cycles/s", target: "vs bare loop"}}, nil
}

// bareWithLog runs the bare insert loop on its own store with the
// transparency-log entries the API writes (runBareWrites with a log),
// each commit awaiting its batch when await is set.
func bareWithLog(ctx context.Context, c config, st *stores, await bool) (result, error) {
	// The store without its own log: the loop's log below is the only
	// sequencer on this database.
	name := "writes_bare_log"
	if await {
		name += "_await"
	}
	l, err := openLoadedWith(ctx, st, name, c.writeClaims, c.writeAnalyze(), sqlstore.Options{NoLog: true})
	if err != nil {
		return result{}, err
	}
	defer l.close()
	agents, _, err := makeAgents(ctx, l.db, c.conns)
	if err != nil {
		return result{}, err
	}
	// The log on the loop's own connections (its statements are prepared
	// on them), as sqlstore opens it: the key the store made is loaded.
	log, err := translog.Open(ctx, l.raw.DB, l.raw.DB, string(l.raw.Dialect), translog.Options{})
	if err != nil {
		return result{}, err
	}
	defer log.Close()
	fmt.Println("  bare insert loop + log entries …")
	stopWaits := st.waits(c.pgWaits)
	defer stopWaits("bare insert loop + log entries")
	r, err := runBareWrites(l.raw, log, await, agents, l.ids, c.d)
	printSequencer(ctx, log)
	return r, err
}

// printSequencer prints what the log's sequencer did during a row: the
// batches, the rate while integrating (entries / time inside batches),
// the waits for integration that timed out and what is still pending.
func printSequencer(ctx context.Context, log *translog.Log) {
	if log == nil {
		return
	}
	s := log.Stats()
	pending, _ := log.Pending(ctx)
	fmt.Printf("    sequencer: %d entries in %d batches (%.1f a batch, at most %d), %.0f entries/s while integrating (%.1f%% of the time), %d awaits timed out, %d attempts skipped, %d errors, %d pending after the row\n",
		s.Entries, s.Batches, float64(s.Entries)/max(1, float64(s.Batches)), s.MaxBatch, s.EntriesPerSecond(), 100*s.Busy.Seconds()/max(1e-9, s.Span.Seconds()),
		s.Timeouts, s.Skipped, s.Errors, pending)
	fmt.Printf("    integration lag (commit -> in the checkpoint), oldest write of each of %d drains: mean %s, max %s, %d over 1 s\n",
		s.Drains, s.MeanLag().Round(10*time.Microsecond), s.MaxLag.Round(10*time.Microsecond), s.LagOver1s)
}

// checkErrors prints the rows' notes and fails the run when a row measured
// nothing or more than maxErrRate of its requests failed.
func checkErrors(rows []row) error {
	fmt.Printf("load average after: %s\n", loadavg())
	for _, r := range rows {
		if r.r.note != "" {
			fmt.Printf("note: %s: %s\n", strings.TrimSpace(r.name), r.r.note)
		}
	}
	for _, r := range rows {
		total := r.r.ops
		if r.unit == "cycles/s" {
			total *= 3
		}
		if total == 0 || float64(r.r.errors) > maxErrRate*float64(total) {
			return fmt.Errorf("%s: %d failed of %d: the benchmark did not run properly", r.name, r.r.errors, total)
		}
	}
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// loaded is a store holding funded claims, with a raw handle on its database.
type loaded struct {
	url    string
	db     *sqlstore.DB
	raw    *benchdata.Raw
	ids    []string
	closed bool
}

func (l *loaded) close() {
	if !l.closed {
		l.db.Close()
		l.raw.Close()
		l.closed = true
	}
}

// openLoaded opens a fresh store named name holding n funded claims listed
// by one submitter.
func openLoaded(ctx context.Context, st *stores, name string, n int, analyze bool) (*loaded, error) {
	return openLoadedWith(ctx, st, name, n, analyze, sqlstore.Options{})
}

// openLoadedWith is openLoaded with the store opened with opt.
func openLoadedWith(ctx context.Context, st *stores, name string, n int, analyze bool, opt sqlstore.Options) (*loaded, error) {
	u, err := st.fresh(ctx, name)
	if err != nil {
		return nil, err
	}
	db, err := sqlstore.Open(ctx, u, opt)
	if err != nil {
		return nil, err
	}
	raw, err := benchdata.OpenRaw(u)
	if err != nil {
		db.Close()
		return nil, err
	}
	l := &loaded{url: u, db: db, raw: raw}
	t0 := time.Now()
	sub, _, err := benchdata.Agent(ctx, db, "submitter")
	if err == nil {
		l.ids, err = benchdata.LoadClaims(ctx, raw, sub.ID, n, name)
	}
	if err == nil && analyze {
		err = benchdata.Analyze(ctx, raw)
	}
	if err != nil {
		l.close()
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	fmt.Fprintf(os.Stderr, "(loaded %d claims into %s in %s)\n", n, name, time.Since(t0).Round(time.Millisecond))
	return l, nil
}

// makeAgents registers n runner agents and returns their ids and keys.
func makeAgents(ctx context.Context, db *sqlstore.DB, n int) (ids, keys []string, err error) {
	for i := range n {
		a, key, err := benchdata.Agent(ctx, db, fmt.Sprintf("runner %d", i))
		if err != nil {
			return nil, nil, err
		}
		ids, keys = append(ids, a.ID), append(keys, key)
	}
	return ids, keys, nil
}

// sampleClaim returns the body of GET /api/v1/claims/DL-0001.
func sampleClaim(api http.Handler) ([]byte, error) {
	srv, err := serve(api)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	res, err := http.Get(srv.url + "/api/v1/claims/DL-0001")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/claims/DL-0001: %d %s", res.StatusCode, b)
	}
	return b, nil
}

// measure serves h and runs the read load against it.
func measure(label string, h http.Handler, load readLoad, profile string) (result, error) {
	fmt.Println(label, "…")
	srv, err := serve(h)
	if err != nil {
		return result{}, err
	}
	stop, err := startProfile(profile)
	if err != nil {
		return result{}, err
	}
	r, err := load.run(srv.url)
	stop()
	if serr := srv.stop(); err == nil {
		err = serr
	}
	return r, err
}

func profilePath(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// startProfile starts a CPU profile into path ("" for none) and returns
// the function that stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// newAPI builds the API as `dotlab serve` does, except for the rate
// limits: those are on, so that their cost is measured, but far above what
// the load sends (64 clients from one address would otherwise be refused at
// the default 30 requests/s). readCache is httpapi.Config.ReadCache (0:
// the default cache, -1: none). Internal errors are logged to stderr.
func newAPI(db *sqlstore.DB, leaks *leakcheck.Checker, readCache int) (*httpapi.Server, error) {
	unlimited := httpapi.RateLimit{PerSecond: 1e9, Burst: 1e9}
	return httpapi.New(httpapi.Config{Store: db, Version: "bench", Leaks: leaks, ReadCache: readCache,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		AgentLimit: unlimited, AnonymousLimit: unlimited})
}

// settleLoop runs the settlement clock every second, as `dotlab serve`
// does, until the returned function is called.
func settleLoop(db *sqlstore.DB) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if _, err := protocol.New(protocol.Config{Store: db, Unscreened: true}).Settle(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintln(os.Stderr, "settlement sweep:", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func machine(c config, wrk, engineVersion string) {
	fmt.Printf("machine: %d cores (GOMAXPROCS %d), %s, %s %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("engine:  %s\n", engineVersion)
	fmt.Printf("load average before: %s (other work on the machine skews every row)\n", loadavg())
	if wrk != "" {
		fmt.Printf("load:    %s (client on the same machine as the server)\n", wrkVersion(wrk))
	} else {
		fmt.Println("load:    Go load generator in this process (wrk not found or -no-wrk)")
	}
	if c.analyze {
		fmt.Println("note:    -analyze: ANALYZE ran after each load (sqlstore never runs it by itself)")
	}
}

func printTable(rows []row) {
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\t\trate\t\tp50\tp99\terrors\tratio\ttarget\t\t")
	for _, r := range rows {
		ratio, target, v := "", "", ""
		if r.ratio != 0 {
			ratio, target = fmt.Sprintf("%.2fx", r.ratio), r.target
		}
		if r.met != nil {
			v = verdict(*r.met)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", r.group, r.name, r.r.rate(), r.unit,
			ms(r.r.p50), ms(r.r.p99), r.r.errors, ratio, target, v)
	}
	tw.Flush()
}

// loadavg returns the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func verdict(ok bool) string {
	if ok {
		return "target met"
	}
	return "MISSED"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// newID returns prefix + 20 random base32 characters, like sqlstore's ids.
func newID(prefix string) string {
	b := make([]byte, 13)
	rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:20]
}

// writeAnalyze says whether the write rows' stores are analyzed after
// loading: with -analyze, and always on PostgreSQL, where a row run before
// autovacuum's first ANALYZE of the freshly loaded claims collapsed (the
// first row of a run at 55-100 cycles/s against 260-380 for the next,
// 2026-12-02: plans made on a table with no statistics); a live server's
// tables are analyzed by autovacuum.
func (c config) writeAnalyze() bool {
	return c.analyze || c.engine == sqlstore.Postgres
}
