package translog

import (
	"context"
	"sync"
	"time"
)

// The sequencer (Tessera's model): record transactions write pending
// entries (Append); one batch at a time, across every process on the
// database, integrates all that are committed (integrate). Each process
// runs a sequencer goroutine woken by Await (after a record's commit) and
// by a tick that integrates what a crashed or idle process left pending;
// the process whose batch holds the log head's row is the sequencer of
// that batch, the others skip and try again shortly.

// Defaults of Options.Tick and Options.MaxBatch.
const (
	DefaultTick     = 100 * time.Millisecond
	DefaultMaxBatch = 2048
	busyRetry       = 2 * time.Millisecond // another process's batch is running
	errorRetry      = 50 * time.Millisecond
)

// sequencer is one process's share of the sequencing: the generations of
// its batches, for Await.
type sequencer struct {
	wake chan struct{} // capacity 1: a batch is wanted
	stop context.CancelFunc
	done chan struct{} // closed when the goroutine ends

	mu      sync.Mutex
	started uint64        // batches begun
	drained uint64        // the last batch begun that left no committed entry pending
	changed chan struct{} // closed (and replaced) when drained advances
	oldest  time.Time     // the earliest Committed call no drain has served yet (zero: none)
}

func newSequencer() *sequencer {
	return &sequencer{wake: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{})}
}

func (s *sequencer) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats are what this process's sequencing did since Open.
type Stats struct {
	Batches  int64         // batches that integrated at least one entry
	Entries  int64         // entries they integrated
	Busy     time.Duration // wall time inside those batches (begin to commit)
	MaxBatch int64         // the most entries one batch integrated
	Skipped  int64         // batch attempts that found another process's batch running
	Errors   int64         // batches that failed (each retried)
	Timeouts int64         // Await calls whose context ended first
	Span     time.Duration // from the first batch's begin to the last one's end
	// Lag is the integration lag of this process's own writes: from a
	// Committed call to the end of the drain that integrated what was
	// committed before it. MaxLag is the largest over every drain (each
	// drain measures its oldest unserved call, so MaxLag bounds every
	// record's lag); LagOver1s counts drains whose oldest call waited
	// longer than a second (the bound docs/verification.md §2 states).
	MaxLag    time.Duration
	LagOver1s int64
	Drains    int64 // drains that served at least one Committed call
	LagSum    time.Duration
	first     time.Time
}

// MeanLag is LagSum / Drains: the mean lag of each drain's oldest write.
func (s Stats) MeanLag() time.Duration {
	if s.Drains == 0 {
		return 0
	}
	return s.LagSum / time.Duration(s.Drains)
}

// EntriesPerSecond is the sequencing rate while it works: Entries / Busy.
func (s Stats) EntriesPerSecond() float64 {
	if s.Busy <= 0 {
		return 0
	}
	return float64(s.Entries) / s.Busy.Seconds()
}

// Stats returns the process's sequencing counters.
func (l *Log) Stats() Stats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.stats
}

// timedBatch is integrate, counted in Stats.
func (l *Log) timedBatch(ctx context.Context) (batchResult, error) {
	t0 := time.Now()
	res, err := l.integrate(ctx)
	d := time.Since(t0)
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	switch {
	case err != nil:
		l.stats.Errors++
	case res.busy:
		l.stats.Skipped++
	case res.entries > 0:
		if l.stats.first.IsZero() {
			l.stats.first = t0
		}
		l.stats.Span = time.Since(l.stats.first)
		l.stats.Batches++
		l.stats.Entries += int64(res.entries)
		l.stats.Busy += d
		l.stats.MaxBatch = max(l.stats.MaxBatch, int64(res.entries))
	}
	return res, err
}

// Committed wakes the sequencer after a transaction that appended has
// committed, without waiting for the batch: the write's answer does not
// wait for integration (docs/verification.md §2 "Sequencing"); readers of
// a pending entry wait for it instead. The time of the call is kept for
// Stats' lag figures. With Options.Manual it does nothing (Sync
// integrates).
func (l *Log) Committed() {
	if l.manual {
		return
	}
	s := l.seq
	s.mu.Lock()
	if s.oldest.IsZero() {
		s.oldest = time.Now()
	}
	s.mu.Unlock()
	s.poke()
}

// servedLag records the lag of the oldest Committed call made before the
// drain's first batch began (since; zero when there was none).
func (l *Log) servedLag(since time.Time) {
	if since.IsZero() {
		return
	}
	lag := time.Since(since)
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	l.stats.Drains++
	l.stats.LagSum += lag
	l.stats.MaxLag = max(l.stats.MaxLag, lag)
	if lag > time.Second {
		l.stats.LagOver1s++
	}
}

// Await returns once every entry committed before the call is integrated
// (in the tree, with an index and a signed checkpoint covering it): after
// a batch that began after the call left nothing pending. It returns ctx's
// error when ctx ends first; the entries are then integrated later (the
// record is committed either way). With Options.Manual it integrates in
// the caller.
func (l *Log) Await(ctx context.Context) error {
	if l.manual {
		_, err := l.Sync(ctx)
		return err
	}
	s := l.seq
	s.mu.Lock()
	target := s.started + 1
	s.mu.Unlock()
	s.poke()
	for {
		s.mu.Lock()
		ok, ch := s.drained >= target, s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			l.statsMu.Lock()
			l.stats.Timeouts++
			l.statsMu.Unlock()
			return ctx.Err()
		}
	}
}

// Sync integrates in the caller until nothing committed before the call
// is pending, and returns how many entries it integrated. It is what
// Options.Manual logs (benchmarks, tests) call instead of the goroutine.
func (l *Log) Sync(ctx context.Context) (n int, err error) {
	for {
		res, err := l.timedBatch(ctx)
		n += res.entries
		switch {
		case err != nil:
			return n, err
		case res.busy:
			if err := sleep(ctx, busyRetry); err != nil {
				return n, err
			}
		case !res.full:
			return n, nil
		}
	}
}

// run is the sequencer goroutine.
func (l *Log) run(ctx context.Context) {
	s := l.seq
	defer close(s.done)
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
			if !l.anyPending(ctx) {
				continue
			}
		}
		l.drain(ctx)
	}
}

// drain runs batches until one leaves nothing pending, then releases the
// waiters of the batches begun so far and records the lag of the oldest
// Committed call its batches took (every entry committed before that call
// is integrated by then: the last batch began after it).
func (l *Log) drain(ctx context.Context) {
	s := l.seq
	var since time.Time // the oldest Committed call taken by a batch of this drain
	for ctx.Err() == nil {
		s.mu.Lock()
		s.started++
		g := s.started
		if since.IsZero() {
			since = s.oldest
		}
		s.oldest = time.Time{}
		s.mu.Unlock()
		res, err := l.timedBatch(ctx)
		switch {
		case err != nil:
			sleep(ctx, errorRetry)
			continue
		case res.busy:
			sleep(ctx, busyRetry)
			continue
		case res.full:
			continue
		}
		s.mu.Lock()
		s.drained = g
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
		l.servedLag(since)
		return
	}
}

// anyPending reports whether log_pending holds a committed entry (false
// on an error: the next tick asks again).
func (l *Log) anyPending(ctx context.Context) bool {
	var n int
	err := l.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM log_pending LIMIT 1) p`).Scan(&n)
	return err == nil && n > 0
}

// Pending is the number of entries written and not yet integrated.
func (l *Log) Pending(ctx context.Context) (int64, error) {
	var n int64
	err := l.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM log_pending`).Scan(&n)
	return n, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// remember keeps sc as the latest checkpoint this process signed.
func (l *Log) remember(sc signedCheckpoint) {
	l.mu.Lock()
	if l.latest.cp.Size <= sc.cp.Size {
		l.latest = sc
	}
	l.mu.Unlock()
}
