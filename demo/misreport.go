package demo

import (
	"strconv"
	"sync"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/runner"
)

// stageDispute sets a's agent.Agent.BeforePublish hook for the
// DEMONSTRATION of the dispute mechanism: the runner misreports one value of
// the first reproduced or not_reproduced run it gets, flipping its outcome.
// The challenger's independent rerun disagrees, and three reviewers decide
// by rerunning (docs/mechanism.md §4). Real runners never do this. The
// returned channel is closed once the misreport is staged.
func (s *session) stageDispute(a *agent.Agent) <-chan struct{} {
	staged := make(chan struct{})
	var once sync.Once
	a.BeforePublish = func(m *dotlab.Manifest, rec *runner.Record) {
		if !rec.Body.Outcome.Compared() {
			return
		}
		once.Do(func() {
			misreport(m, rec)
			s.logf("%-14s DEMONSTRATION: misreports %s to stage a dispute (outcome now %s)", "runner-ada", rec.Body.Comparisons[0].Name, rec.Body.Outcome)
			close(staged)
		})
	}
	return staged
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
