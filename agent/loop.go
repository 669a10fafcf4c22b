package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

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
