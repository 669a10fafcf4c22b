package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrStalled marks a transfer cut off by the stall rule (Policy.MinRate
// over Policy.StallWindow; docs/sandbox.md "Fetching what a manifest
// names"): a server that trickles bytes cannot hold a runner past its fetch
// budget. The rule sits in Policy.Transport, so datasets, archives, git
// fetches over http(s) and image pulls all obey it.
var ErrStalled = errors.New("transfer stalled")

// ErrFetchBudget marks a run whose downloads, clones and pulls together did
// not finish within Policy.Timeout.
var ErrFetchBudget = errors.New("fetch budget exhausted")

func (p Policy) minRate() int64 {
	if p.MinRate > 0 {
		return p.MinRate
	}
	return 32 << 10
}

func (p Policy) stallWindow() time.Duration {
	if p.StallWindow > 0 {
		return p.StallWindow
	}
	return 30 * time.Second
}

// budget returns ctx bounded by the run's fetch budget (Policy.Timeout);
// when it runs out, context.Cause is ErrFetchBudget.
func (p Policy) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, p.timeout(), fmt.Errorf("%w: the inputs were not all fetched within %s (the fetch budget)", ErrFetchBudget, p.timeout()))
}

// stallGuard wraps every response body of next in the stall rule.
type stallGuard struct {
	policy Policy
	next   http.RoundTripper
}

func (g *stallGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	resp.Body = g.policy.watch(req.URL.Redacted(), resp.Body)
	return resp, nil
}

// stallBody is a response body under the stall rule: a watchdog checks
// every window that at least minRate×window bytes arrived, and otherwise
// closes the body, so that a Read blocked on a silent server returns.
type stallBody struct {
	body io.ReadCloser
	mu   sync.Mutex
	n    int64
	err  error // set once the rule fired
	done chan struct{}
	once sync.Once
}

func (p Policy) watch(what string, body io.ReadCloser) io.ReadCloser {
	b := &stallBody{body: body, done: make(chan struct{})}
	window := p.stallWindow()
	need := int64(float64(p.minRate()) * window.Seconds())
	go func() {
		t := time.NewTicker(window)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				b.mu.Lock()
				got := b.n - last
				last = b.n
				if got < need {
					b.err = fmt.Errorf("%s: %w: %d bytes in the last %s, below the minimum of %d bytes/s", what, ErrStalled, got, window, p.minRate())
				}
				b.mu.Unlock()
				if got < need {
					b.body.Close()
					return
				}
			}
		}
	}()
	return b
}

func (b *stallBody) Read(p []byte) (int, error) {
	k, err := b.body.Read(p)
	b.mu.Lock()
	b.n += int64(k)
	stalled := b.err
	b.mu.Unlock()
	if stalled != nil && err != nil && err != io.EOF {
		return k, stalled
	}
	return k, err
}

func (b *stallBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.body.Close()
}
