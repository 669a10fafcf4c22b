package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
)

// capabilities are what the demo's agents declare: the example images have
// Python (the claims written for DotLab, the Python package) and R.
func capabilities() []string { return []string{"python", "r"} }

// cast is the demo's agents: a submitter, two runners, a challenger and
// three reviewers, all registered with the python and r capabilities.
type cast struct {
	submitter   *client.Client
	ada, bo, cy *agent.Agent
	reviewers   []*agent.Agent
}

// register registers one agent with a new signing key and returns its
// authenticated client and the key.
func (s *session) register(ctx context.Context, name string) (*client.Client, *attest.Key, error) {
	a, k, err := agent.RegisterSigned(ctx, s.pub, dotlab.NewAgent{Name: name, Operator: "dotlab demo", Capabilities: capabilities()})
	if err != nil {
		return nil, nil, err
	}
	return s.pub.WithKey(a.APIKey), k, nil
}

// newAgent registers name and gives it its own rerun engine (runc, the
// demo's private-address fetch policy) and work directory.
func (s *session) newAgent(ctx context.Context, name string) (*agent.Agent, error) {
	c, k, err := s.register(ctx, name)
	if err != nil {
		return nil, err
	}
	return agent.New(c, agent.Config{Key: k, CacheDir: filepath.Join(s.imagesVar, "cache"), WorkDir: filepath.Join(s.varDir, "runs", name), Runtime: "runc",
		AllowPrivate: true, Capabilities: capabilities(), Clock: s.o.Clock,
		Logf: func(format string, args ...any) { s.logf("%-14s %s", name, fmt.Sprintf(format, args...)) }})
}

func (s *session) newCast(ctx context.Context) (*cast, error) {
	submitter, _, err := s.register(ctx, "lab-submitter")
	if err != nil {
		return nil, err
	}
	var agents []*agent.Agent
	for _, name := range []string{"runner-ada", "runner-bo", "challenger-cy", "reviewer-di", "reviewer-ed", "reviewer-fa"} {
		a, err := s.newAgent(ctx, name)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	return &cast{submitter: submitter, ada: agents[0], bo: agents[1], cy: agents[2], reviewers: agents[3:]}, nil
}

// untilIdle ends a loop at its first step that finds nothing to do.
func untilIdle() bool { return true }

// work runs the agents with the same loop and steps as `dotlab runner`,
// `dotlab challenger` and `dotlab review --rerun` (agent.Agent.Loop): both
// runners until the job pool is empty, the challenger until the runners are
// done and no run is left in its window, then each reviewer until no
// dispute is left for it. The first error of any of them ends the demo.
func (s *session) work(ctx context.Context, c *cast) error {
	staged := s.stageDispute(c.ada)
	errs := make(chan error, 3)
	runLoop := func(a *agent.Agent, done chan<- struct{}) {
		defer close(done)
		if err := a.Loop(ctx, a.RunOnce, agent.LoopOptions{Idle: untilIdle, StopOnError: true}); err != nil {
			errs <- err
		}
	}
	adaDone, boDone, runnersDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go runLoop(c.ada, adaDone)
	// runner-bo starts once runner-ada has staged the dispute (or ran out of
	// jobs without a run to stage it with), so that the misreport is ada's.
	select {
	case <-staged:
	case <-adaDone:
	}
	go runLoop(c.bo, boDone)
	go func() { <-adaDone; <-boDone; close(runnersDone) }()
	if err := c.cy.Loop(ctx, c.cy.ChallengeOnce, agent.LoopOptions{Poll: 500 * time.Millisecond, Idle: afterLastPass(runnersDone), StopOnError: true}); err != nil {
		errs <- err
	}
	<-runnersDone
	select {
	case err := <-errs:
		return err
	default:
	}
	for _, r := range c.reviewers {
		if err := r.Loop(ctx, r.ReviewOnce, agent.LoopOptions{Idle: untilIdle, StopOnError: true}); err != nil {
			return err
		}
	}
	return nil
}

// afterLastPass is the challenger's Idle: it ends the loop at the first pass
// that finds nothing and began after done was closed, so that runs published
// at the very end are challenged too.
func afterLastPass(done <-chan struct{}) func() bool {
	last := false
	return func() bool {
		if last {
			return true
		}
		select {
		case <-done:
			last = true // one more pass
		default:
		}
		return false
	}
}
