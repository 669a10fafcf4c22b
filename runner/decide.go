package runner

import (
	"strings"

	"github.com/dotlab/dotlab"
)

// facts are what the steps of a rerun found (docs/sandbox.md "The steps"),
// before any outcome is decided: the steps fill them, decide alone turns
// them into the outcome and the record.
type facts struct {
	inputs     map[string]string     // dataset (and helper) name → SHA-256 as fetched
	mismatches []string              // one line per dataset whose hash differs (nothing ran)
	env        dotlab.RunEnvironment // image digest, seed, code, runtime
	outputs    map[string]string     // output_hashes
	notes      string                // what the steps report (outputs left out, extra result keys)
	rerun      map[string]dotlab.Decimal
	readFrom   map[string]string        // where each rerun value was read
	extra      []string                 // results.json keys that are not targets
	issue      *specIssue               // the claim cannot be run as written
	refused    []string                 // the requests the download responder refused (Record.Refused)
	uncompared []dotlab.UncomparedValue // what a run that did not finish printed (kept on spec_issue only)
	trail      inputTrail               // inputs verified from their hosts, and those read from the archive
}

func newFacts(m *dotlab.Manifest) *facts {
	return &facts{inputs: map[string]string{}, outputs: map[string]string{},
		env: dotlab.RunEnvironment{ImageDigest: m.Environment.ImageDigest(), Seed: m.Seed}}
}

// decide turns what the steps found into the outcome and the record, in one
// place (docs/manifest-spec.md section 6, docs/protocol.md §6 "Outcomes"):
// spec_issue when a step found the claim cannot be run as written or its
// results are malformed; input_mismatch when a dataset's hash differs
// (nothing ran); otherwise the exact comparison decides reproduced or
// not_reproduced, each comparison logged.
func decide(log *Log, m *dotlab.Manifest, f *facts) *Record {
	rec := &Record{Body: dotlab.RunBody{InputHashes: f.inputs, OutputHashes: f.outputs, Environment: f.env,
		Comparisons: []dotlab.RunComparison{}, Notes: f.notes}, Extra: f.extra, ReadFrom: f.readFrom, Refused: f.refused}
	issue := f.issue
	switch {
	case issue != nil:
	case len(f.mismatches) > 0:
		rec.Body.Outcome = dotlab.OutcomeInputMismatch
		rec.Body.Notes = "input hash mismatch, nothing was executed: " + strings.Join(f.mismatches, "; ")
		return rec
	default:
		cs, outcome, err := dotlab.Decide(m.Targets, f.rerun)
		if err == nil {
			compared(log, rec, cs, outcome)
			return rec
		}
		issue = issuef("results.json is malformed: %s", strings.Join(dotlab.ErrorDetail(err), "; ")).(*specIssue)
	}
	rec.Body.Outcome = dotlab.OutcomeSpecIssue
	rec.Body.Notes = joinNotes(issue.note, rec.Body.Notes)
	rec.Body.Uncompared = f.uncompared
	return rec
}

// compared records the comparisons cs and their outcome in rec and the log.
func compared(log *Log, rec *Record, cs []dotlab.Comparison, outcome dotlab.Outcome) {
	for _, c := range cs {
		msg := c.Name + " within tolerance"
		if !c.Match {
			msg = c.Name + " outside tolerance"
		}
		log.Info("compare", msg, map[string]any{"name": c.Name, "published": c.Published, "rerun": c.Rerun,
			"difference": c.Difference, "tolerance_type": c.ToleranceType, "tolerance": c.Tolerance, "allowed": c.Allowed, "match": c.Match})
		rec.Body.Comparisons = append(rec.Body.Comparisons, dotlab.RunComparison{Name: c.Name, Rerun: c.Rerun})
	}
	rec.Comparisons = cs
	rec.Body.Outcome = outcome
	if outcome == dotlab.OutcomeNotReproduced {
		rec.Body.Notes = joinNotes("outside tolerance under the published spec: "+strings.Join(dotlab.DescribeMismatches(cs), "; "), rec.Body.Notes)
	}
}
