package dotlab_test

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

// A rationale names a target as a whole word, in any letter case
// (docs/mechanism.md §4 "Who may vote").
func TestMentionsName(t *testing.T) {
	for _, c := range []struct {
		text, name string
		want       bool
	}{
		{"sd_diff: 1.17 matches", "sd_diff", true},
		{"SD_DIFF differs", "sd_diff", true},
		{"the value of (t) is 4.06", "t", true},
		{"the t_paired value", "t", false},
		{"sd_diffs differ", "sd_diff", false},
		{"xsd_diff", "sd_diff", false},
		{"ends with beta.1", "beta.1", true},
		{"beta.10 is not it", "beta.1", false},
		{"mean-diff, then sd", "mean-diff", true},
		{"anything", "", false},
	} {
		if got := dotlab.MentionsName(c.text, c.name); got != c.want {
			t.Errorf("MentionsName(%q, %q) = %v, want %v", c.text, c.name, got, c.want)
		}
	}
	err := dotlab.CheckRationaleTargets("I looked at everything and side with the runner.", []string{"mean_diff", "sd_diff"})
	if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.rationale: ") || !strings.Contains(err.Error(), "mean_diff, sd_diff") {
		t.Errorf("no target named: %v", err)
	}
	if err := dotlab.CheckRationaleTargets("mean_diff is fine; the runner is right", []string{"mean_diff", "sd_diff"}); err != nil {
		t.Errorf("mean_diff named: %v", err)
	}
}

// The notes rule's error names the comparison and the challenger's own
// value, never the runner's value or the difference (docs/protocol.md §7).
func TestDisagreementNotesErrorQuotesNoRunnerValue(t *testing.T) {
	run := []dotlab.Comparison{{Name: "sd_diff", Rerun: "1.2299", Match: false}}
	mine := []dotlab.Comparison{{Name: "sd_diff", Rerun: "1.17", Match: true}}
	err := dotlab.CheckDisagreementNotes("the sd differs", dotlab.Differences(run, mine))
	d := err.Error()
	if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(d, `"sd_diff"`) || !strings.Contains(d, "1.17 is within tolerance") ||
		strings.Contains(d, "1.2299") || strings.Contains(d, "0.0599") {
		t.Errorf("notes error: %v", err)
	}
}

// The notes rule's "name every comparison that differs" reads names as the
// rationale rule does (MentionsName): a whole word in any letter case, so
// "mean" is not named by "meaning" or "mean_x", and is by "MEAN:".
func TestDisagreementNotesNameWholeWords(t *testing.T) {
	run := []dotlab.Comparison{{Name: "mean", Rerun: "2.6", Match: false}}
	mine := []dotlab.Comparison{{Name: "mean", Rerun: "2.5", Match: true}}
	diffs := dotlab.Differences(run, mine)
	for notes, named := range map[string]bool{
		"the meaning of the test differs: 2 things":      false,
		"mean_x is 0.1 off":                              false,
		"MEAN: my rerun 2.5 is within, the run 0.1 over": true,
		"mean 2.5 vs 2.6, difference 0.1":                true,
	} {
		if err := dotlab.CheckDisagreementNotes(notes, diffs); (err == nil) != named {
			t.Errorf("notes %q: %v, want named %v", notes, err, named)
		}
	}
}
