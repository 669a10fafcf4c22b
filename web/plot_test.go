package web

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

// TestTargetPlotScale: each row's scale places huge, tiny and negative
// values and a zero tolerance inside the picture, in order, with the exact
// decimal text in the labels.
func TestTargetPlotScale(t *testing.T) {
	type tc struct {
		target       dotlab.Target
		run, ch      string
		runRight     bool // the run's mark is right of the published value
		chRight      bool
		bandAtLeastW float64
	}
	abs := func(v string) dotlab.Tolerance { return dotlab.Tolerance{Type: "absolute", Value: dotlab.Decimal(v)} }
	cases := []tc{
		{dotlab.Target{Name: "huge", Value: "1.7976931348623157e308", Tolerance: abs("1e300")}, "1.7976931348623157e308", "-1.7976931348623157e308", false, false, minBand},
		{dotlab.Target{Name: "tiny", Value: "1e-300", Tolerance: dotlab.Tolerance{Type: "relative", Value: "0.01"}}, "1.005e-300", "2e-300", true, true, 10},
		{dotlab.Target{Name: "negative", Value: "-42.5", Tolerance: abs("0.5")}, "-41", "-42.75", true, false, 20},
		{dotlab.Target{Name: "zero_tol", Value: "0", Tolerance: abs("0")}, "0", "0.000001", false, true, minBand},
		{dotlab.Target{Name: "all_equal", Value: "-7", Tolerance: abs("0")}, "-7", "-7", false, false, minBand},
	}
	var rows []targetRow
	for _, c := range cases {
		run := must(t, c.target, c.run)
		ch := must(t, c.target, c.ch)
		rows = append(rows, targetRow{Target: c.target, Official: &run, Challenges: []challengeCell{{Comparison: &ch}}})
	}
	p := targetPlot(rows)
	if p == nil || len(p.Rows) != len(cases) || p.Height <= plotTop {
		t.Fatalf("plot %+v", p)
	}
	inside := func(x float64) bool { return x >= plotLeft-0.01 && x <= plotWidth-plotRight+0.01 }
	for i, r := range p.Rows {
		c := cases[i]
		runX, chX := r.Marks[0].X, r.Marks[1].X
		if !inside(r.PubX) || !inside(runX) || !inside(chX) || !inside(r.BandX) || !inside(r.BandX+r.BandW) {
			t.Errorf("%s: outside the picture: published %.1f band %.1f+%.1f run %.1f challenge %.1f", r.Name, r.PubX, r.BandX, r.BandW, runX, chX)
		}
		if r.BandW < c.bandAtLeastW || r.BandX > r.PubX || r.BandX+r.BandW < r.PubX {
			t.Errorf("%s: band %.1f+%.1f around %.1f, want at least %.1f wide", r.Name, r.BandX, r.BandW, r.PubX, c.bandAtLeastW)
		}
		if c.target.Value != dotlab.Decimal(c.run) && (runX > r.PubX) != c.runRight {
			t.Errorf("%s: run at %.1f, published at %.1f", r.Name, runX, r.PubX)
		}
		if c.target.Value != dotlab.Decimal(c.ch) && (chX > r.PubX) != c.chRight {
			t.Errorf("%s: challenge at %.1f, published at %.1f", r.Name, chX, r.PubX)
		}
		if !strings.Contains(r.Marks[0].Text, "run "+c.run) || !strings.Contains(r.Marks[1].Text, "challenge 1 "+c.ch) ||
			!strings.Contains(r.Caption, "published "+string(c.target.Value)) || r.Marks[1].Diamond == "" {
			t.Errorf("%s: labels %q / %q / %q", r.Name, r.Caption, r.Marks[0].Text, r.Marks[1].Text)
		}
		if !strings.Contains(p.Desc, r.Caption) {
			t.Errorf("%s: desc %q leaves out the caption", r.Name, p.Desc)
		}
	}
	if targetPlot(nil) != nil {
		t.Error("a plot without targets")
	}
}

func must(t *testing.T, target dotlab.Target, rerun string) dotlab.Comparison {
	t.Helper()
	c, err := dotlab.Compare(target, dotlab.Decimal(rerun))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
