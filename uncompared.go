package dotlab

import "fmt"

// UncomparedValue is the value one target's source (or results.json)
// gave in a run that did not finish as the execution contract requires:
// the entrypoint exited non-zero, timed out or was killed, so the run is
// spec_issue and nothing was compared (docs/protocol.md §6 "What was
// printed"). It is evidence of what the analysis printed before it
// stopped, never a rerun value: the server recomputes no comparison from it
// and it opens no challenge window.
type UncomparedValue struct {
	// Name is the target's name.
	Name string `json:"name"`
	// Value is the decimal text the source extracted.
	Value Decimal `json:"value"`
	// Source says where it was read ("stdout, regex …",
	// "/work/out/results.json"), at most MaxUncomparedSource bytes.
	Source string `json:"source,omitempty"`
}

// MaxUncomparedSource bounds UncomparedValue.Source, in bytes.
const MaxUncomparedSource = 2048

// checkUncomparedValues: only a spec_issue run carries uncompared values;
// each names a distinct target of m and holds a valid decimal.
func (b *RunBody) checkUncomparedValues(m *Manifest, p *Problems) {
	if len(b.Uncompared) == 0 {
		return
	}
	if b.Outcome != OutcomeSpecIssue {
		p.Add("$.uncompared", "only a spec_issue run carries uncompared values (what a run that did not finish printed); a %s run gives its values in comparisons", b.Outcome)
		return
	}
	targets := map[string]bool{}
	for _, t := range m.Targets {
		targets[t.Name] = true
	}
	seen := map[string]bool{}
	for i, u := range b.Uncompared {
		at := fmt.Sprintf("$.uncompared[%d]", i)
		switch {
		case !targets[u.Name]:
			p.Add(at+".name", "%q is not a target of this manifest", u.Name)
		case seen[u.Name]:
			p.Add(at+".name", "duplicate target %q: give at most one value per target", u.Name)
		}
		seen[u.Name] = true
		if err := u.Value.Validate(); err != nil {
			p.Add(at+".value", "%v", err)
		}
		if len(u.Source) > MaxUncomparedSource {
			p.Add(at+".source", "is %d bytes; at most %d", len(u.Source), MaxUncomparedSource)
		}
	}
}
