package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
)

// steps returns a Step that answers with results in turn, then "" forever.
func steps(results ...any) (Step, *int) {
	n := 0
	return func(context.Context) (string, error) {
		defer func() { n++ }()
		if n >= len(results) {
			return "", nil
		}
		switch r := results[n].(type) {
		case error:
			return "DL-0001", r
		default:
			return r.(string), nil
		}
	}, &n
}

func logged() (*Agent, *strings.Builder) {
	var b strings.Builder
	return &Agent{Logf: func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }}, &b
}

func TestLoopOnce(t *testing.T) {
	a, log := logged()
	step, n := steps()
	if err := a.Loop(context.Background(), step, LoopOptions{Once: true}); err != nil || *n != 1 || !strings.Contains(log.String(), "nothing to do") {
		t.Fatalf("once, nothing to do: err %v, %d steps, log %q", err, *n, log)
	}
	boom := errors.New("boom")
	step, n = steps(boom)
	if err := a.Loop(context.Background(), step, LoopOptions{Once: true}); !errors.Is(err, boom) || *n != 1 {
		t.Fatalf("once, failing: err %v, %d steps", err, *n)
	}
}

func TestLoopRetriesErrorsAndStopsOnUnauthorized(t *testing.T) {
	a, log := logged()
	unauthorized := &dotlab.Error{Code: dotlab.EUNAUTHORIZED, Detail: []string{"bad key"}}
	step, n := steps(errors.New("flaky"), "DL-0002", unauthorized, "DL-0003")
	err := a.Loop(context.Background(), step, LoopOptions{Poll: time.Millisecond})
	if !errors.Is(err, unauthorized) || *n != 3 {
		t.Fatalf("err %v after %d steps, want the 401 after 3", err, *n)
	}
	if !strings.Contains(log.String(), "flaky") {
		t.Fatalf("the retried error was not logged: %q", log)
	}
}

func TestLoopIdleAndStopOnError(t *testing.T) {
	a, _ := logged()
	step, n := steps("DL-0001", "DL-0002")
	if err := a.Loop(context.Background(), step, LoopOptions{Idle: func() bool { return true }}); err != nil || *n != 3 {
		t.Fatalf("until idle: err %v after %d steps, want nil after 3", err, *n)
	}
	boom := errors.New("boom")
	step, n = steps("DL-0001", boom, "DL-0002")
	if err := a.Loop(context.Background(), step, LoopOptions{StopOnError: true, Idle: func() bool { return true }}); !errors.Is(err, boom) || *n != 2 {
		t.Fatalf("stop on error: err %v after %d steps", err, *n)
	}
}

func TestLoopEndsWithContext(t *testing.T) {
	a, _ := logged()
	ctx, cancel := context.WithCancel(context.Background())
	step, _ := steps()
	done := make(chan error, 1)
	go func() { done <- a.Loop(ctx, step, LoopOptions{Poll: time.Hour}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cancelled loop: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}
