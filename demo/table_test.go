package demo

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

func TestPrintTable(t *testing.T) {
	results := []Result{
		{Example: Example{Title: "Fisher 1935", Expect: dotlab.OutcomeReproduced},
			Claim: &dotlab.Claim{ID: "DL-0002", State: dotlab.StateSettled, Outcome: dotlab.OutcomeReproduced},
			Run:   &dotlab.Run{Outcome: dotlab.OutcomeReproduced}, Challs: []*dotlab.Challenge{{Agrees: true}}},
		{Example: Example{Title: strings.Repeat("long title ", 10), Expect: dotlab.OutcomeNotReproduced},
			Claim:    &dotlab.Claim{ID: "DL-0001", State: dotlab.StateSettled, Outcome: dotlab.OutcomeNotReproduced},
			Disputed: true, Votes: []dotlab.Vote{{Vote: dotlab.VoteChallenger}, {Vote: dotlab.VoteRunner}, {Vote: dotlab.VoteChallenger}}},
		{Example: Example{Title: "crashing code", Expect: dotlab.OutcomeSpecIssue},
			Claim: &dotlab.Claim{ID: "DL-0003", State: dotlab.StateSettled, Outcome: dotlab.OutcomeSpecIssue}},
	}
	var out strings.Builder
	if err := PrintTable(&out, "http://x", results); err != nil {
		t.Fatalf("PrintTable: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"dispute: 2-1 for the challenger", "window closed, 1 agreeing challenge(s)", "settled at once",
		"http://x/labs/DL-0003", "...", "Every claim settled with the verdict its published numbers lead to."} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "DL-0001") > strings.Index(got, "DL-0002") {
		t.Errorf("rows not sorted by claim id:\n%s", got)
	}
	results[2].Example.Expect = dotlab.OutcomeReproduced
	if err := PrintTable(&out, "http://x", results); err == nil || !strings.Contains(err.Error(), "DL-0003: spec_issue, expected reproduced") {
		t.Fatalf("unexpected verdict: err %v", err)
	}
}

func TestAfterLastPassNeedsOnePassAfterDone(t *testing.T) {
	done := make(chan struct{})
	idle := afterLastPass(done)
	if idle() || idle() {
		t.Fatal("ended before done")
	}
	close(done)
	if idle() {
		t.Fatal("ended without a pass after done")
	}
	if !idle() {
		t.Fatal("did not end at the first idle pass after done")
	}
}

func TestMisreportFlipsTheOutcome(t *testing.T) {
	m := &dotlab.Manifest{Targets: []dotlab.Target{{Name: "t", Value: "4.06", Tolerance: dotlab.Tolerance{Type: dotlab.ToleranceAbsolute, Value: "0.01"}}}}
	for _, tc := range []struct {
		rerun    dotlab.Decimal
		from, to dotlab.Outcome
	}{
		{"4.06", dotlab.OutcomeReproduced, dotlab.OutcomeNotReproduced},
		{"9.99", dotlab.OutcomeNotReproduced, dotlab.OutcomeReproduced},
	} {
		rec := &runner.Record{Body: dotlab.RunBody{Outcome: tc.from, Comparisons: []dotlab.RunComparison{{Name: "t", Rerun: tc.rerun}}}}
		misreport(m, rec)
		if rec.Body.Outcome != tc.to {
			t.Errorf("%s with rerun %s: misreported as %s, want %s", tc.from, tc.rerun, rec.Body.Outcome, tc.to)
		}
	}
}
