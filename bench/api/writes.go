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
	const kinds = 3
	names := [kinds]string{"GET /jobs/next", "POST /jobs/{id}/accept", "POST /runs"}
	want := [kinds]int{http.StatusOK, http.StatusOK, http.StatusCreated}
	lat := make([][kinds][]time.Duration, len(keys))
	cycles := make([]int64, len(keys))
	errs := make([]int64, len(keys))
	var exhausted atomic.Bool
	var firstErr sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &writeClient{c: newClient(), key: key}
			var every time.Duration
			next := start
			if rate > 0 {
				every = time.Duration(float64(len(keys)) / rate * float64(time.Second))
				next = start.Add(every * time.Duration(i) / time.Duration(len(keys)))
			}
			step := func(k int, method, url string, body []byte) ([]byte, bool) {
				t0 := time.Now()
				status, b, err := w.do(method, url, body)
				lat[i][k] = append(lat[i][k], time.Since(t0))
				if k == 0 && status == http.StatusNoContent {
					exhausted.Store(true)
					cancel()
					return nil, false
				}
				if err != nil || status != want[k] {
					errs[i]++
					firstErr.Do(func() { fmt.Fprintf(os.Stderr, "  first write error: %s %s: %d %v %s\n", method, url, status, err, b) })
					return nil, false
				}
				return b, true
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
				b, ok := step(0, "GET", base+"/api/v1/jobs/next", nil)
				if !ok {
					continue
				}
				var job struct {
					ID string `json:"job_id"`
				}
				if err := json.Unmarshal(b, &job); err != nil || job.ID == "" {
					errs[i]++
					continue
				}
				if _, ok := step(1, "POST", base+"/api/v1/jobs/"+job.ID+"/accept", nil); !ok {
					continue
				}
				if _, ok := step(2, "POST", base+"/api/v1/runs", bytes.Replace(tmpl, []byte(idMark), []byte(job.ID), 1)); !ok {
					continue
				}
				cycles[i]++
			}
		}()
	}
	wg.Wait()
	r := result{elapsed: time.Since(start)}
	var all []time.Duration
	for k := range kinds {
		var byKind []time.Duration
		for i := range lat {
			byKind = append(byKind, lat[i][k]...)
		}
		all = append(all, byKind...)
		p50, p99 := percentiles(byKind)
		r.perKind = append(r.perKind, kindLatency{names[k], p50, p99})
	}
	for i := range keys {
		r.ops += cycles[i]
		r.errors += errs[i]
	}
	r.p50, r.p99 = percentiles(all)
	if exhausted.Load() {
		r.note = "stopped early: every claim was drawn (raise -write-claims)"
	}
	return r, nil
}

// runBareWrites writes the rows of the same cycle with plain SQL on raw: for
// each claim, the offer (claim update + job insert), the accept (claim and
// job updates, runner role, event) and the run (claim update, run insert,
// job update, two events), three transactions as on the real path, with
// the same statements and values, from len(agents) goroutines each taking
// the next claim of ids. No reads: this is the database's limit for these
// rows. Latencies are per transaction.
func runBareWrites(raw *benchdata.Raw, agents []string, ids []string, d time.Duration) (result, error) {
	body, comps, err := benchdata.RunBody(idMark)
	if err != nil {
		return result{}, err
	}
	w := dotlab.DefaultWindows
	var next atomic.Int64
	lat := make([][]time.Duration, len(agents))
	cycles := make([]int64, len(agents))
	errs := make([]int64, len(agents))
	var firstErr sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i, agent := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := next.Add(1) - 1
				if n >= int64(len(ids)) {
					cancel()
					return
				}
				claim := ids[n]
				runBody := string(bytes.Replace(body, []byte(idMark), []byte(claim), 1))
				err := func() error {
					now := time.Now().UTC()
					t0 := time.Now()
					expires := now.Add(w.Accept)
					if err := bareTx(ctx, raw, func(tx *sql.Tx) error {
						if err := one(tx.ExecContext(ctx, `UPDATE claims SET runner_id = $1, offer_expires_at = $2, updated_at = $3
							WHERE id = $4 AND state = 'funded' AND runner_id IS NULL`, agent, expires.UnixMilli(), now.UnixMilli(), claim)); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, claim_id, agent_id, state, offered_at, offer_expires_at)
							VALUES ($1, $2, $3, 'offered', $4, $5)`, newID("job_"), claim, agent, now.UnixMilli(), expires.UnixMilli())
						return err
					}); err != nil {
						return err
					}
					t1 := time.Now()
					deadline := now.Add(w.Publish)
					if err := bareTx(ctx, raw, func(tx *sql.Tx) error {
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
						return event(ctx, tx, claim, dotlab.StateAssigned, now, "runner "+agent+" accepted")
					}); err != nil {
						return err
					}
					t2 := time.Now()
					runID := newID("run_")
					if err := bareTx(ctx, raw, func(tx *sql.Tx) error {
						if err := one(tx.ExecContext(ctx, `UPDATE claims SET state = 'challenge_window', run_id = $1, challenge_deadline = $2,
							publish_deadline = NULL, updated_at = $3
							WHERE id = $4 AND runner_id = $5 AND state IN ('assigned', 'running') AND publish_deadline > $3`,
							runID, now.Add(w.Challenge).UnixMilli(), now.UnixMilli(), claim, agent)); err != nil {
							return err
						}
						if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, claim_id, runner_id, outcome, body, comparisons, published_at)
							VALUES ($1, $2, $3, $4, $5, $6, $7)`, runID, claim, agent, dotlab.OutcomeReproduced, runBody, string(comps), now.UnixMilli()); err != nil {
							return err
						}
						if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'published', closed_at = $1
							WHERE claim_id = $2 AND agent_id = $3 AND state = 'accepted'`, now.UnixMilli(), claim, agent); err != nil {
							return err
						}
						if err := event(ctx, tx, claim, dotlab.StatePublished, now, "run "+runID+" published: reproduced"); err != nil {
							return err
						}
						return event(ctx, tx, claim, dotlab.StateChallengeWindow, now, "challenge window open")
					}); err != nil {
						return err
					}
					t3 := time.Now()
					lat[i] = append(lat[i], t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
					return nil
				}()
				switch {
				case err == nil:
					cycles[i]++
				case ctx.Err() == nil:
					errs[i]++
					firstErr.Do(func() { fmt.Fprintf(os.Stderr, "  first bare write error on %s: %v\n", claim, err) })
				}
			}
		}()
	}
	wg.Wait()
	r := result{elapsed: time.Since(start)}
	var all []time.Duration
	for i := range agents {
		all = append(all, lat[i]...)
		r.ops += cycles[i]
		r.errors += errs[i]
	}
	r.p50, r.p99 = percentiles(all)
	if next.Load() >= int64(len(ids)) {
		r.note = "stopped early: every claim was written (raise -write-claims)"
	}
	return r, nil
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
