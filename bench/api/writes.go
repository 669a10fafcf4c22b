package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/bench/benchdata"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
)

// idMark stands for the job id in the run body template.
const idMark = "DL-JOBID"

// writeClient is one runner agent of the real write load.
type writeClient struct {
	c   *client
	key string
}

// do sends one request and returns the status and body.
func (w *writeClient) do(method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := w.c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// runRealWrites runs the runner workflow through the API: each of len(keys)
// agents loops GET /jobs/next → POST /jobs/{id}/accept → POST /runs (a
// valid reproduced body) for d, or until no funded claim is left. One op
// is one full cycle; latencies are per request. With rate > 0 the clients
// start cycles on a schedule totalling rate cycles a second (each client
// every len(keys)/rate seconds, staggered) instead of back to back, to see
// latency below saturation.
func runRealWrites(base string, keys []string, d time.Duration, rate float64) (result, error) {
	tmpl, _, err := benchdata.RunBody(idMark)
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rw := &realWrites{
		base: base, tmpl: tmpl, clients: len(keys), rate: rate, cancel: cancel,
		lat:    make([][realKinds][]time.Duration, len(keys)),
		cycles: make([]int64, len(keys)),
		errs:   make([]int64, len(keys)),
	}
	var wg sync.WaitGroup
	rw.start = time.Now()
	for i, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw.client(ctx, i, &writeClient{c: newClient(), key: key})
		}()
	}
	wg.Wait()
	return rw.result(), nil
}

// realKinds is the number of requests in one cycle of the real write load;
// realNames and realWant name them and the status each must answer.
const realKinds = 3

var (
	realNames = [realKinds]string{"GET /jobs/next", "POST /jobs/{id}/accept", "POST /runs"}
	realWant  = [realKinds]int{http.StatusOK, http.StatusOK, http.StatusCreated}
)

// realWrites is the shared state of one real write load: per client i, the
// latencies of each request kind, the cycles completed and the errors.
type realWrites struct {
	base      string
	tmpl      []byte
	clients   int
	rate      float64
	start     time.Time
	cancel    context.CancelFunc
	lat       [][realKinds][]time.Duration
	cycles    []int64
	errs      []int64
	exhausted atomic.Bool
	firstErr  sync.Once
}

// client runs cycles as client i until ctx ends, back to back or, with a
// rate, on the client's staggered schedule.
func (rw *realWrites) client(ctx context.Context, i int, w *writeClient) {
	var every time.Duration
	next := rw.start
	if rw.rate > 0 {
		every = time.Duration(float64(rw.clients) / rw.rate * float64(time.Second))
		next = rw.start.Add(every * time.Duration(i) / time.Duration(rw.clients))
	}
	for ctx.Err() == nil {
		if every > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			next = next.Add(every)
		}
		if rw.cycle(i, w) {
			rw.cycles[i]++
		}
	}
}

// cycle draws a job, accepts it and publishes a run; it reports whether
// all three succeeded.
func (rw *realWrites) cycle(i int, w *writeClient) bool {
	b, ok := rw.step(i, w, 0, "GET", rw.base+"/api/v1/jobs/next", nil)
	if !ok {
		return false
	}
	var job struct {
		ID string `json:"job_id"`
	}
	if err := json.Unmarshal(b, &job); err != nil || job.ID == "" {
		rw.errs[i]++
		return false
	}
	if _, ok := rw.step(i, w, 1, "POST", rw.base+"/api/v1/jobs/"+job.ID+"/accept", nil); !ok {
		return false
	}
	_, ok = rw.step(i, w, 2, "POST", rw.base+"/api/v1/runs", bytes.Replace(rw.tmpl, []byte(idMark), []byte(job.ID), 1))
	return ok
}

// step sends request kind k for client i and records its latency. A 204 on
// GET /jobs/next means every claim was drawn: it stops the load.
func (rw *realWrites) step(i int, w *writeClient, k int, method, url string, body []byte) ([]byte, bool) {
	t0 := time.Now()
	status, b, err := w.do(method, url, body)
	rw.lat[i][k] = append(rw.lat[i][k], time.Since(t0))
	if k == 0 && status == http.StatusNoContent {
		rw.exhausted.Store(true)
		rw.cancel()
		return nil, false
	}
	if err != nil || status != realWant[k] {
		rw.errs[i]++
		rw.firstErr.Do(func() { fmt.Fprintf(os.Stderr, "  first write error: %s %s: %d %v %s\n", method, url, status, err, b) })
		return nil, false
	}
	return b, true
}

// result sums the clients' counts and latencies, overall and per kind.
func (rw *realWrites) result() result {
	r := result{elapsed: time.Since(rw.start)}
	var all []time.Duration
	for k := range realKinds {
		var byKind []time.Duration
		for i := range rw.lat {
			byKind = append(byKind, rw.lat[i][k]...)
		}
		all = append(all, byKind...)
		p50, p99 := percentiles(byKind)
		r.perKind = append(r.perKind, kindLatency{realNames[k], p50, p99})
	}
	for i := range rw.clients {
		r.ops += rw.cycles[i]
		r.errors += rw.errs[i]
	}
	r.p50, r.p99 = percentiles(all)
	if rw.exhausted.Load() {
		r.note = "stopped early: every claim was drawn (raise -write-claims)"
	}
	return r
}

// runBareWrites writes the rows of the same cycle with plain SQL on raw: for
// each claim, the offer (claim update + job insert), the accept (claim and
// job updates, runner role, event) and the run (claim update, run insert,
// job update, two events), three transactions as on the real path, with
// the same statements and values, from len(agents) goroutines each taking
// the next claim of ids. No reads: this is the database's limit for these
// rows. Latencies are per transaction.
//
// With log set, the accept and the run also append their transparency-log
// entries in their transactions and wait after the commit for the log's
// sequencer to integrate them, as sqlstore does (translog.Append, Await):
// the same rows as the API writes with its log.
func runBareWrites(raw *benchdata.Raw, log *translog.Log, await bool, agents []string, ids []string, d time.Duration) (result, error) {
	body, comps, err := benchdata.RunBody(idMark)
	if err != nil {
		return result{}, err
	}
	var tmpl dotlab.Run
	if err := json.Unmarshal(body, &tmpl.Body); err != nil {
		return result{}, err
	}
	if err := json.Unmarshal(comps, &tmpl.Comparisons); err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	bw := &bareWrites{
		raw: raw, log: log, await: await, run: tmpl, body: body, comps: string(comps), w: dotlab.DefaultWindows, ids: ids, cancel: cancel,
		lat:    make([][]time.Duration, len(agents)),
		cycles: make([]int64, len(agents)),
		errs:   make([]int64, len(agents)),
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i, agent := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bw.agent(ctx, i, agent)
		}()
	}
	wg.Wait()
	r := result{elapsed: time.Since(start)}
	var all []time.Duration
	for i := range agents {
		all = append(all, bw.lat[i]...)
		r.ops += bw.cycles[i]
		r.errors += bw.errs[i]
	}
	r.p50, r.p99 = percentiles(all)
	if bw.next.Load() >= int64(len(ids)) {
		r.note = "stopped early: every claim was written (raise -write-claims)"
	}
	return r, nil
}

// bareWrites is the shared state of one bare write load: the claims still
// to take, and per agent i the transaction latencies, cycles and errors.
type bareWrites struct {
	raw      *benchdata.Raw
	log      *translog.Log // nil: no log entries
	await    bool          // wait after each commit for integration (sqlstore.Options.AwaitLog)
	run      dotlab.Run    // the run's body and comparisons, for its entry
	body     []byte
	comps    string
	w        dotlab.Windows
	ids      []string
	next     atomic.Int64
	cancel   context.CancelFunc
	lat      [][]time.Duration
	cycles   []int64
	errs     []int64
	firstErr sync.Once
}

// agent writes cycles as agent i, each on the next claim, until ctx ends
// or no claim is left.
func (bw *bareWrites) agent(ctx context.Context, i int, agent string) {
	for ctx.Err() == nil {
		n := bw.next.Add(1) - 1
		if n >= int64(len(bw.ids)) {
			bw.cancel()
			return
		}
		claim := bw.ids[n]
		err := bw.cycle(ctx, i, agent, claim)
		switch {
		case err == nil:
			bw.cycles[i]++
		case ctx.Err() == nil:
			bw.errs[i]++
			bw.firstErr.Do(func() { fmt.Fprintf(os.Stderr, "  first bare write error on %s: %v\n", claim, err) })
		}
	}
}

// cycle runs the three transactions of one claim and records their latencies.
func (bw *bareWrites) cycle(ctx context.Context, i int, agent, claim string) error {
	runBody := string(bytes.Replace(bw.body, []byte(idMark), []byte(claim), 1))
	now := time.Now().UTC()
	t0 := time.Now()
	if err := bareTx(ctx, bw.raw, func(tx *sql.Tx) error { return bw.offer(ctx, tx, agent, claim, now) }); err != nil {
		return err
	}
	t1 := time.Now()
	if err := bareTx(ctx, bw.raw, func(tx *sql.Tx) error { return bw.accept(ctx, tx, agent, claim, now) }); err != nil {
		return err
	}
	bw.awaitLog(ctx)
	t2 := time.Now()
	if err := bareTx(ctx, bw.raw, func(tx *sql.Tx) error { return bw.publish(ctx, tx, agent, claim, runBody, now) }); err != nil {
		return err
	}
	bw.awaitLog(ctx)
	t3 := time.Now()
	bw.lat[i] = append(bw.lat[i], t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
	return nil
}

// offer offers claim to agent: the claim update and the job insert.
func (bw *bareWrites) offer(ctx context.Context, tx *sql.Tx, agent, claim string, now time.Time) error {
	expires := now.Add(bw.w.Accept)
	if err := one(tx.ExecContext(ctx, `UPDATE claims SET runner_id = $1, offer_expires_at = $2, updated_at = $3
		WHERE id = $4 AND state = 'funded' AND runner_id IS NULL`, agent, expires.UnixMilli(), now.UnixMilli(), claim)); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, claim_id, agent_id, state, offered_at, offer_expires_at)
		VALUES ($1, $2, $3, 'offered', $4, $5)`, newID("job_"), claim, agent, now.UnixMilli(), expires.UnixMilli())
	return err
}

// accept has agent accept claim: claim and job updates, the runner role
// and the assigned event.
func (bw *bareWrites) accept(ctx context.Context, tx *sql.Tx, agent, claim string, now time.Time) error {
	deadline := now.Add(bw.w.Publish)
	if err := one(tx.ExecContext(ctx, `UPDATE claims SET state = 'assigned', offer_expires_at = NULL, publish_deadline = $1, updated_at = $2
		WHERE id = $3 AND state = 'funded' AND runner_id = $4 AND offer_expires_at > $2`, deadline.UnixMilli(), now.UnixMilli(), claim, agent)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'accepted', accepted_at = $1, publish_deadline = $2
		WHERE claim_id = $3 AND agent_id = $4 AND state = 'offered'`, now.UnixMilli(), deadline.UnixMilli(), claim, agent); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'runner', $3)`,
		claim, agent, now.UnixMilli()); err != nil {
		return err
	}
	if err := event(ctx, tx, claim, dotlab.StateAssigned, now, "runner "+agent+" accepted"); err != nil {
		return err
	}
	return bw.logEntry(ctx, tx, tlogfmt.OfferEntry(claim, agent, now.Truncate(time.Millisecond), deadline.Truncate(time.Millisecond)))
}

// logEntry appends e in tx when the loop writes the log.
func (bw *bareWrites) logEntry(ctx context.Context, tx *sql.Tx, e tlogfmt.Entry) error {
	if bw.log == nil {
		return nil
	}
	return bw.log.Append(ctx, tx, e)
}

// awaitLog does after a commit what sqlstore does: wakes the log's
// sequencer, and with -await-log waits for it to integrate the entries
// just written (nothing when the loop writes no log).
func (bw *bareWrites) awaitLog(ctx context.Context) {
	if bw.log == nil {
		return
	}
	if !bw.await {
		bw.log.Committed()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	bw.log.Await(ctx)
}

// publish records agent's reproduced run of claim: the claim update, the
// run insert, the job update and the published and challenge-window events.
func (bw *bareWrites) publish(ctx context.Context, tx *sql.Tx, agent, claim, runBody string, now time.Time) error {
	runID := newID("run_")
	if err := one(tx.ExecContext(ctx, `UPDATE claims SET state = 'challenge_window', run_id = $1, challenge_deadline = $2,
		publish_deadline = NULL, updated_at = $3
		WHERE id = $4 AND runner_id = $5 AND state IN ('assigned', 'running') AND publish_deadline > $3`,
		runID, now.Add(bw.w.Challenge).UnixMilli(), now.UnixMilli(), claim, agent)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, claim_id, runner_id, outcome, body, comparisons, published_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, runID, claim, agent, dotlab.OutcomeReproduced, runBody, bw.comps, now.UnixMilli()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'published', closed_at = $1
		WHERE claim_id = $2 AND agent_id = $3 AND state = 'accepted'`, now.UnixMilli(), claim, agent); err != nil {
		return err
	}
	if err := event(ctx, tx, claim, dotlab.StatePublished, now, "run "+runID+" published: reproduced"); err != nil {
		return err
	}
	if err := event(ctx, tx, claim, dotlab.StateChallengeWindow, now, "challenge window open"); err != nil {
		return err
	}
	r := bw.run
	r.ID, r.ClaimID, r.RunnerID, r.Outcome, r.PublishedAt = runID, claim, agent, dotlab.OutcomeReproduced, now.Truncate(time.Millisecond)
	r.Body.JobID = claim
	return bw.logEntry(ctx, tx, tlogfmt.RunEntry(&r))
}

// bareTx runs fn in a transaction on raw (BEGIN IMMEDIATE on SQLite, as
// sqlstore's writer).
func bareTx(ctx context.Context, raw *benchdata.Raw, fn func(*sql.Tx) error) error {
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// one checks that a conditional UPDATE changed exactly one row.
func one(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("conditional update matched no row")
	}
	return nil
}

// event appends a claim event exactly as sqlstore does.
func event(ctx context.Context, tx *sql.Tx, claimID string, state dotlab.ClaimState, at time.Time, detail string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO claim_events (claim_id, seq, state, at, detail)
		VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM claim_events WHERE claim_id = $1), $2, $3, $4)`,
		claimID, state, at.UnixMilli(), detail)
	return err
}
