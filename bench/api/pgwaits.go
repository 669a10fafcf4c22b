package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// benchApp is the application_name of every PostgreSQL connection the
// benchmark's stores open, so that the wait sampler sees only those.
const benchApp = "dotlab-bench"

// withApp adds application_name=benchApp to a PostgreSQL URL.
func withApp(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := p.Query()
	q.Set("application_name", benchApp)
	p.RawQuery = q.Encode()
	return p.String()
}

// waitSampler samples pg_stat_activity every 10 ms while a row runs
// (-pg-waits): what each of the benchmark's backends in a transaction is
// doing — running, waiting for a lock (and on which statement), for the
// WAL flush, or idle in its transaction waiting for its client. It is the
// profile of where a write's time goes on the database side.
type waitSampler struct {
	db      *sql.DB
	cancel  context.CancelFunc
	done    chan struct{}
	samples int
	counts  map[string]int
}

func startWaits(admin *sql.DB) *waitSampler {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waitSampler{db: admin, cancel: cancel, done: make(chan struct{}), counts: map[string]int{}}
	go func() {
		defer close(w.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			w.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *waitSampler) sample(ctx context.Context) {
	rows, err := w.db.QueryContext(ctx, `SELECT state, COALESCE(wait_event_type, ''), COALESCE(wait_event, ''), query
		FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid()`, benchApp)
	if err != nil {
		return
	}
	defer rows.Close()
	w.samples++
	for rows.Next() {
		var state, typ, event, query string
		if rows.Scan(&state, &typ, &event, &query) != nil {
			return
		}
		what := "running"
		switch {
		case state == "idle in transaction":
			what = "idle in transaction (its client is busy)"
		case typ != "":
			what = typ + ":" + event
		}
		w.counts[what+" | "+statement(query)]++
	}
}

// statement shortens a query to its first words.
func statement(q string) string {
	f := strings.Fields(q)
	if len(f) > 6 {
		f = f[:6]
	}
	return strings.Join(f, " ")
}

// stop ends the sampling and prints the busiest (state, statement) pairs
// as the mean number of backends in that state.
func (w *waitSampler) stop(label string) {
	w.cancel()
	<-w.done
	if w.samples == 0 {
		return
	}
	type kv struct {
		k string
		n int
	}
	var all []kv
	total := 0
	for k, n := range w.counts {
		all = append(all, kv{k, n})
		total += n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	fmt.Printf("  PostgreSQL backends in a transaction, %s (mean over %d samples; %.1f in all):\n", label, w.samples, float64(total)/float64(w.samples))
	for i, e := range all {
		if i == 12 {
			break
		}
		fmt.Printf("    %5.1f  %s\n", float64(e.n)/float64(w.samples), e.k)
	}
}
