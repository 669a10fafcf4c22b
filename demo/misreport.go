package demo

import (
	"context"
	"strconv"
	"sync"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/runner"
)

// stageDispute wraps a's rerun engine for the DEMONSTRATION of the
// dispute mechanism: the runner misreports one value of the first
// reproduced or not_reproduced run it gets, flipping its outcome. The
// challenger's independent rerun disagrees, and three reviewers decide by
// rerunning (docs/mechanism.md §4). Real runners never do this. The
// returned channel is closed once the misreport is staged.
func (s *session) stageDispute(a *agent.Agent) <-chan struct{} {
	m := &misreporter{Engine: a.Engine, staged: make(chan struct{}), logf: s.logf}
	a.Engine = m
	return m.staged
}

// misreporter is an agent.Engine that misreports its first compared rerun
// (misreport), for the demonstration only.
type misreporter struct {
	agent.Engine
	once   sync.Once
	staged chan struct{}
	logf   func(format string, args ...any)
}

// Rerun reruns m with the wrapped engine, then misreports the first
// compared record.
func (e *misreporter) Rerun(ctx context.Context, m *dotlab.Manifest, outDir string) (*runner.Record, error) {
	rec, err := e.Engine.Rerun(ctx, m, outDir)
	if err != nil || !rec.Body.Outcome.Compared() {
		return rec, err
	}
	e.once.Do(func() {
		misreport(m, rec)
		e.logf("%-14s DEMONSTRATION: misreports %s to stage a dispute (outcome now %s)", "runner-ada", rec.Body.Comparisons[0].Name, rec.Body.Outcome)
		close(e.staged)
	})
	return rec, nil
}

// misreport flips a record's outcome for the dispute demonstration: a
// reproduced run gets its first target moved far outside tolerance; a
// not_reproduced run gets every value set to the published one.
func misreport(m *dotlab.Manifest, rec *runner.Record) {
	values := map[string]dotlab.Decimal{}
	for i, c := range rec.Body.Comparisons {
		v := c.Rerun
		if rec.Body.Outcome == dotlab.OutcomeReproduced && i == 0 {
			v = dotlab.Decimal(strconv.FormatFloat(c.Rerun.Float64()*1.5+1, 'f', -1, 64))
		} else if rec.Body.Outcome == dotlab.OutcomeNotReproduced {
			for _, t := range m.Targets {
				if t.Name == c.Name {
					v = t.Value
				}
			}
		}
		rec.Body.Comparisons[i].Rerun = v
		values[c.Name] = v
	}
	comps, outcome, err := dotlab.Decide(m.Targets, values)
	if err == nil {
		rec.Comparisons, rec.Body.Outcome = comps, outcome
	}
}
