package dotlab_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

func TestCompareEdgeCases(t *testing.T) {
	abs := func(v string) dotlab.Tolerance { return dotlab.Tolerance{Type: "absolute", Value: dotlab.Decimal(v)} }
	rel := func(v string) dotlab.Tolerance { return dotlab.Tolerance{Type: "relative", Value: dotlab.Decimal(v)} }
	cases := []struct {
		name      string
		published string
		tol       dotlab.Tolerance
		rerun     string
		match     bool
		diff      string
	}{
		{"float64 would say no: 1.1 vs 1.0 abs 0.1", "1.0", abs("0.1"), "1.1", true, "0.1"},
		{"exactly on the boundary matches", "4.062", abs("0.0005"), "4.0625", true, "0.0005"},
		{"just past the boundary", "4.062", abs("0.0005"), "4.06250000000001", false, "0.00050000000001"},
		{"2^53+1 differs from 2^53", "9007199254740993", abs("0"), "9007199254740992", false, "1"},
		{"exact zero tolerance, same number written differently", "1.50", abs("0"), "1.5e0", true, "0"},
		{"relative on a negative published value", "-200", rel("0.01"), "-198", true, "2"},
		{"relative just outside", "-200", rel("0.01"), "-197.99", false, "2.01"},
		{"tiny exponents are not flushed to zero", "1e-300", abs("0"), "2e-300", false, "1e-300"},
		{"sd n vs n-1 (Student)", "1.17", abs("0.005"), "1.2299", false, "0.0599"},
		{"NIST relative 1e-12", "299.852400000000", rel("1e-12"), "299.85240000000005", true, "0.00000000000005"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := dotlab.Compare(dotlab.Target{Name: "x", Value: dotlab.Decimal(c.published), Tolerance: c.tol}, dotlab.Decimal(c.rerun))
			if err != nil {
				t.Fatal(err)
			}
			if got.Match != c.match {
				t.Errorf("match = %v, want %v (difference %s, allowed %s)", got.Match, c.match, got.Difference, got.Allowed)
			}
			if string(got.Difference) != c.diff && !sameDecimal(t, got.Difference, c.diff) {
				t.Errorf("difference = %s, want %s", got.Difference, c.diff)
			}
		})
	}
}

func sameDecimal(t *testing.T, a dotlab.Decimal, b string) bool {
	x, err := a.Rat()
	if err != nil {
		t.Fatal(err)
	}
	y, err := dotlab.Decimal(b).Rat()
	if err != nil {
		t.Fatal(err)
	}
	return x.Cmp(y) == 0
}

func TestCompareRejectsBadNumbers(t *testing.T) {
	tgt := dotlab.Target{Name: "x", Value: "1", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0"}}
	for _, bad := range []string{"NaN", "Infinity", "-Inf", "1e999999", "0x10", "", "1.", ".5", "01", "1e400", "-1e400", "9.99e308", "1e-309", "0e999999"} {
		if _, err := dotlab.Compare(tgt, dotlab.Decimal(bad)); err == nil {
			t.Errorf("Compare accepted rerun %q", bad)
		}
	}
	tgt.Tolerance.Type = "percent"
	if _, err := dotlab.Compare(tgt, "1"); dotlab.ErrorCode(err) != dotlab.EINVALID {
		t.Errorf("unknown tolerance type: err = %v", err)
	}
}

func TestDecide(t *testing.T) {
	targets := []dotlab.Target{
		{Name: "a", Value: "1", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0.1"}},
		{Name: "b", Value: "2", Tolerance: dotlab.Tolerance{Type: "relative", Value: "0.5"}},
	}
	_, out, err := dotlab.Decide(targets, map[string]dotlab.Decimal{"a": "1.1", "b": "3"})
	if err != nil || out != dotlab.OutcomeReproduced {
		t.Fatalf("got %v, %v; want reproduced", out, err)
	}
	cs, out, err := dotlab.Decide(targets, map[string]dotlab.Decimal{"a": "1.2", "b": "3"})
	if err != nil || out != dotlab.OutcomeNotReproduced || cs[0].Match || !cs[1].Match {
		t.Fatalf("got %v %v %v; want not_reproduced with a mismatching", cs, out, err)
	}
	_, _, err = dotlab.Decide(targets, map[string]dotlab.Decimal{"a": "1", "c": "3"})
	d := dotlab.ErrorDetail(err)
	if dotlab.ErrorCode(err) != dotlab.EINVALID || len(d) != 2 {
		t.Fatalf("missing b and unknown c: err = %v", err)
	}
}

func TestDecimalFromRat(t *testing.T) {
	for in, want := range map[string]string{"0.1": "0.1", "-0.0": "0", "1e3": "1000", "12.5000": "12.5", "1e-20": "0.00000000000000000001"} {
		r, err := dotlab.Decimal(in).Rat()
		if err != nil {
			t.Fatal(err)
		}
		if got := dotlab.DecimalFromRat(r); string(got) != want {
			t.Errorf("DecimalFromRat(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestDecimalFromRatExtremes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1e399", "1e399"}, {"-1e-400", "-1e-400"}, {"1.5e-120", "1.5e-120"},
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		{"1234567890123456789012345678901", "1.234567890123456789012345678901e30"},
		{"0.000000000000000000000000000001", "0.000000000000000000000000000001"},
		{"12.5", "12.5"}, {"-0.0599", "-0.0599"}, {"100", "100"},
	} {
		// Computed values (differences, allowed values) may lie beyond
		// the bounds on inputs, so these are built without Validate.
		r, ok := new(big.Rat).SetString(tc.in)
		if !ok {
			t.Fatal(tc.in)
		}
		got := dotlab.DecimalFromRat(r)
		if string(got) != tc.want {
			t.Errorf("DecimalFromRat(%s) = %s, want %s", tc.in, string(got), tc.want)
		}
		back, ok := new(big.Rat).SetString(string(got))
		if !ok || back.Cmp(r) != 0 {
			t.Errorf("%s does not round-trip", string(got))
		}
	}
	// A product of extreme tolerances stays encodable.
	c, err := dotlab.Compare(dotlab.Target{Name: "x", Value: "1e-200", Tolerance: dotlab.Tolerance{Type: "relative", Value: "1e-201"}}, "1e-200")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(c); err != nil || c.Allowed != "1e-401" {
		t.Fatalf("allowed %s, marshal %v", c.Allowed, err)
	}
}

// TestCompareAtTheRangeEdges: arithmetic on two in-range values may leave the
// double range (a difference up to about 3.6e308, an allowed value of
// tolerance × |published| down to 1e-616 or up to 3.2e616); it stays exact,
// encodable, and displays in a few characters.
func TestCompareAtTheRangeEdges(t *testing.T) {
	abs := func(v string) dotlab.Tolerance { return dotlab.Tolerance{Type: "absolute", Value: dotlab.Decimal(v)} }
	rel := func(v string) dotlab.Tolerance { return dotlab.Tolerance{Type: "relative", Value: dotlab.Decimal(v)} }
	const maxF = "1.7976931348623157e308"
	for _, c := range []struct {
		name, published string
		tol             dotlab.Tolerance
		rerun           string
		match           bool
		diff, allowed   string // Display forms
	}{
		{"difference beyond the double range", "1e308", abs("0"), "-1e308", false, "2e308", "0"},
		{"largest difference", maxF, abs(maxF), "-" + maxF, false, "3.5953862697246314e308", maxF},
		{"allowed beyond the double range", "1e308", rel("1e308"), "-1e308", true, "2e308", "1e616"},
		{"allowed below the double range", "1e-308", rel("1e-308"), "1e-308", true, "0", "1e-616"},
		{"tiny difference of large values", "1e308", abs("1e-308"), "1.0000000000000001e308", false, "1e292", "1e-308"},
		{"difference with 617 digits", "1e308", abs("1"), "1e-308", false, "≈1e308", "1"},
		{"312-digit difference of the finding", "4.062", abs("0.0005"), maxF, false, "≈" + maxF, "0.0005"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := dotlab.Compare(dotlab.Target{Name: "x", Value: dotlab.Decimal(c.published), Tolerance: c.tol}, dotlab.Decimal(c.rerun))
			if err != nil {
				t.Fatal(err)
			}
			if got.Match != c.match || got.Difference.Display() != c.diff || got.Allowed.Display() != c.allowed {
				t.Fatalf("match %v difference %s allowed %s; want %v %s %s", got.Match, got.Difference, got.Allowed, c.match, c.diff, c.allowed)
			}
			// The record keeps the exact difference.
			pub, _ := new(big.Rat).SetString(c.published)
			re, _ := new(big.Rat).SetString(c.rerun)
			want := new(big.Rat).Sub(re, pub)
			if d, ok := new(big.Rat).SetString(string(got.Difference)); !ok || d.Cmp(want.Abs(want)) != 0 {
				t.Fatalf("difference %.60s… is not exact", string(got.Difference))
			}
			if _, err := json.Marshal(got); err != nil {
				t.Fatal(err)
			}
			for _, line := range dotlab.DescribeMismatches([]dotlab.Comparison{got}) {
				if len(line) > 200 {
					t.Fatalf("mismatch line is %d bytes: %.100s…", len(line), line)
				}
			}
		})
	}
}

// TestDecideOutOfRangeIsMalformed: a results.json value beyond the range
// makes the results malformed (the runner records spec_issue), naming the
// target and the bound.
func TestDecideOutOfRangeIsMalformed(t *testing.T) {
	targets := []dotlab.Target{
		{Name: "big", Value: "1", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0.1"}},
		{Name: "small", Value: "1", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0.1"}},
	}
	_, _, err := dotlab.Decide(targets, map[string]dotlab.Decimal{"big": "1e400", "small": "1e-400"})
	d := strings.Join(dotlab.ErrorDetail(err), "\n")
	if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(d, "target big: rerun value: number out of range: 1e400") ||
		!strings.Contains(d, "1.7976931348623157e308") || !strings.Contains(d, "target small") || !strings.Contains(d, "1e-308") {
		t.Fatalf("err = %v", err)
	}
}
