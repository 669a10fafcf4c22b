package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/verify"
)

// Step does at most one unit of work (RunOnce, ChallengeOnce, ReviewOnce):
// it returns the claim it worked on, or "" when there was nothing to do.
type Step func(context.Context) (string, error)

// LoopOptions say how a Loop waits and when it ends.
type LoopOptions struct {
	// Once ends the loop after one step; that step's error is returned.
	Once bool
	// Poll is the wait after a step that found nothing to do or failed.
	Poll time.Duration
	// Idle, when set, is called after each step that found nothing to do;
	// true ends the loop. Nil keeps polling until ctx ends (the commands).
	// The demo ends a runner when the job pool is empty, and its challenger
	// once the runners are done.
	Idle func() bool
	// StopOnError returns a step's first error instead of logging it and
	// retrying after Poll (the demo, where a failed step is a bug to see).
	StopOnError bool
	// Parallel is how many jobs RunLoop works at once (`dotlab runner
	// --parallel N`); 0 or 1 is one at a time. Loop ignores it.
	Parallel int
}

// Loop calls step until ctx ends or o says to stop. A 401 from the server
// (the key is wrong or revoked) ends it at once with that error; other errors
// are logged and retried after o.Poll. A loop ended by ctx returns nil.
func (a *Agent) Loop(ctx context.Context, step Step, o LoopOptions) error {
	for {
		id, err := step(ctx)
		if client.IsUnauthorized(err) {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if o.StopOnError {
				return err
			}
			a.logf("%v", err)
		}
		if id != "" {
			if err := a.keepCheckpoint(ctx); err != nil {
				return err
			}
		}
		if o.Once {
			if err == nil && id == "" {
				a.logf("nothing to do")
			}
			return err
		}
		if id == "" && err == nil && o.Idle != nil && o.Idle() {
			return nil
		}
		if id == "" || err != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.Poll):
			}
		}
	}
}

// RunLoop is the runner's loop (`dotlab runner`). With o.Parallel at most
// 1 it is Loop(RunOnce). With o.Parallel = N > 1 it works up to N jobs at
// once, each rerun in its own sandbox with its manifest's own limits and
// its own work directory: it draws only when one of its N slots is free,
// one draw at a time, and an accepted job holds its slot until it is
// published or has failed, so the agent never holds more accepted jobs
// than N. Errors are handled as Loop handles them (a 401 ends the loop at
// once; others are logged, or returned with StopOnError); with Once it
// takes at most N jobs, or stops at the first draw that finds none, and
// returns the first error. It returns once every job it took is done.
func (a *Agent) RunLoop(ctx context.Context, o LoopOptions) error {
	if o.Parallel < 0 {
		return fmt.Errorf("--parallel %d: give the number of jobs to work at once, at least 1", o.Parallel)
	}
	if o.Parallel <= 1 {
		return a.Loop(ctx, a.RunOnce, o)
	}
	p := &pool{a: a, o: o, slots: make(chan struct{}, o.Parallel), stop: make(chan struct{})}
	p.draw(ctx)
	p.wg.Wait()
	if ctx.Err() != nil && !client.IsUnauthorized(p.err) {
		return nil
	}
	return p.err
}

// ChallengeLoop is the challenger's loop (`dotlab challenger`):
// Loop(ChallengeOnce).
func (a *Agent) ChallengeLoop(ctx context.Context, o LoopOptions) error {
	return a.Loop(ctx, a.ChallengeOnce, o)
}

// pool is RunLoop's slots and the jobs that hold them.
type pool struct {
	a        *Agent
	o        LoopOptions
	slots    chan struct{} // one token per job being worked
	wg       sync.WaitGroup
	mu       sync.Mutex // guards err and the checkpoint kept (keepCheckpoint)
	err      error      // the error RunLoop returns
	stop     chan struct{}
	stopOnce sync.Once
}

// draw takes jobs while slots are free, until ctx ends or the pool stops.
func (p *pool) draw(ctx context.Context) {
	taken := 0
	for {
		select { // a free slot first: no draw while all N are busy
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		}
		id, m, err := p.a.take(ctx)
		switch {
		case err != nil:
			<-p.slots
			if p.failed(ctx, err) {
				return
			}
		case m != nil:
			taken++
			p.wg.Add(1)
			go p.work(ctx, id, m)
			if p.o.Once && taken == cap(p.slots) {
				return
			}
			continue
		case id != "": // declined: the slot is free again at once
			<-p.slots
			p.checkpoint(ctx)
			continue
		default:
			<-p.slots
			if p.o.Once || (p.o.Idle != nil && p.o.Idle()) {
				if p.o.Once && taken == 0 {
					p.a.logf("nothing to do")
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-time.After(p.o.Poll):
		}
	}
}

// work does one accepted job and frees its slot.
func (p *pool) work(ctx context.Context, id string, m *dotlab.Manifest) {
	defer p.wg.Done()
	defer func() { <-p.slots }()
	if err := p.a.work(ctx, id, m); err != nil {
		p.failed(ctx, err)
	}
	p.checkpoint(ctx)
}

// failed handles an error as Loop does and reports whether the pool must
// stop drawing: a 401, or any error under StopOnError or Once, is kept
// for RunLoop to return; an error because ctx ended stops quietly; others
// are logged.
func (p *pool) failed(ctx context.Context, err error) bool {
	switch {
	case client.IsUnauthorized(err), ctx.Err() == nil && (p.o.StopOnError || p.o.Once):
		p.mu.Lock()
		if p.err == nil {
			p.err = err
		}
		p.mu.Unlock()
		p.stopOnce.Do(func() { close(p.stop) })
		return true
	case ctx.Err() != nil:
		return true
	}
	p.a.logf("%v", err)
	return false
}

// checkpoint checks the server's log after a job (keepCheckpoint), one
// job at a time; a log that fails to verify stops the pool.
func (p *pool) checkpoint(ctx context.Context) {
	p.mu.Lock()
	err := p.a.keepCheckpoint(ctx)
	if err != nil && p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	if err != nil {
		p.stopOnce.Do(func() { close(p.stop) })
	}
}

// LocalCapabilities is what this machine really provides of the registered
// capabilities: gpu only when a GPU device exists.
func LocalCapabilities(registered []string) []string {
	var out []string
	for _, c := range registered {
		if c == "gpu" {
			if _, err := os.Stat("/dev/nvidia0"); err != nil {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// keepCheckpoint checks the server's log against the last checkpoint kept
// (Witness) and keeps the new one. A server without a log, or one that
// cannot be reached now, is logged and skipped; a log that fails to verify
// (a changed key, a bad signature, a fork) stops the agent.
func (a *Agent) keepCheckpoint(ctx context.Context) error {
	if a.Witness == nil {
		return nil
	}
	_, err := a.Witness.Check(ctx, a.Client)
	var f *verify.Failure
	switch {
	case err == nil:
		return nil
	case errors.As(err, &f):
		return fmt.Errorf("the server's transparency log does not verify: %w", err)
	}
	a.logf("transparency log not checked: %v", err)
	return nil
}
