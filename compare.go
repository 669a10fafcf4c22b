package dotlab

import (
	"fmt"
	"math/big"
	"sort"
)

// Tolerance types of manifest spec v0.1 (docs/manifest-spec.md §6).
const (
	ToleranceAbsolute = "absolute"
	ToleranceRelative = "relative"
)

// Comparison is one target compared: the published value from the manifest,
// the rerun value, |rerun - published| (Difference), the largest difference
// that still matches (Allowed: the tolerance itself when absolute, tolerance ×
// |published| when relative), and whether it matched. All numbers are exact
// decimals.
type Comparison struct {
	Name          string  `json:"name"`
	Published     Decimal `json:"published"`
	Rerun         Decimal `json:"rerun"`
	Difference    Decimal `json:"difference"`
	ToleranceType string  `json:"tolerance_type"`
	Tolerance     Decimal `json:"tolerance"`
	Allowed       Decimal `json:"allowed"`
	Match         bool    `json:"match"`
}

// Compare applies a target's tolerance to a rerun value, exactly on the
// decimal text (docs/manifest-spec.md §6): absolute matches iff
// |rerun - published| <= value; relative iff |rerun - published| <= value ×
// |published|. A value exactly on the boundary matches.
//
// It returns an EINVALID error when a number is not a valid Decimal (syntax,
// length, written exponent, or magnitude outside 1e-308…math.MaxFloat64:
// see Decimal.Validate), naming the target and which number, or when the
// tolerance type is unknown. The Comparison's Difference and Allowed are
// exact and may lie beyond that range (|2e308 − (−2e308)|…); print them with
// Display (their String method).
func Compare(t Target, rerun Decimal) (Comparison, error) {
	c := Comparison{Name: t.Name, Published: t.Value, Rerun: rerun, ToleranceType: t.Tolerance.Type, Tolerance: t.Tolerance.Value}
	pub, err := t.Value.Rat()
	if err != nil {
		return c, Errorf(EINVALID, "target %s: published value: %v", t.Name, err)
	}
	re, err := rerun.Rat()
	if err != nil {
		return c, Errorf(EINVALID, "target %s: rerun value: %v", t.Name, err)
	}
	tol, err := t.Tolerance.Value.Rat()
	if err != nil {
		return c, Errorf(EINVALID, "target %s: tolerance: %v", t.Name, err)
	}
	diff := new(big.Rat).Sub(re, pub)
	diff.Abs(diff)
	var allowed *big.Rat
	switch t.Tolerance.Type {
	case ToleranceAbsolute:
		allowed = tol
	case ToleranceRelative:
		allowed = new(big.Rat).Mul(tol, new(big.Rat).Abs(pub))
	default:
		return c, Errorf(EINVALID, "target %s: tolerance type %q is not absolute or relative", t.Name, t.Tolerance.Type)
	}
	c.Difference = DecimalFromRat(diff)
	c.Allowed = DecimalFromRat(allowed)
	c.Match = diff.Cmp(allowed) <= 0
	return c, nil
}

// Decide compares every target with its rerun value and returns the
// comparisons in target order and the outcome: reproduced iff every target
// matches, else not_reproduced (docs/manifest-spec.md §6).
//
// A target with no rerun value, a rerun value for no target, or an invalid
// number makes the results malformed: Decide then returns an EINVALID error
// listing every such problem, and the caller records spec_issue.
func Decide(targets []Target, rerun map[string]Decimal) ([]Comparison, Outcome, error) {
	var probs Problems
	known := make(map[string]bool, len(targets))
	out := make([]Comparison, 0, len(targets))
	all := true
	for _, t := range targets {
		known[t.Name] = true
		v, ok := rerun[t.Name]
		if !ok {
			probs.Add(t.Name, "no rerun value for this target")
			continue
		}
		c, err := Compare(t, v)
		if err != nil {
			probs = append(probs, ErrorLines(err)...)
			continue
		}
		all = all && c.Match
		out = append(out, c)
	}
	var extra []string
	for name := range rerun {
		if !known[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		probs.Add(name, "not a target of this manifest")
	}
	if err := probs.Err(); err != nil {
		return out, "", err
	}
	if all {
		return out, OutcomeReproduced, nil
	}
	return out, OutcomeNotReproduced, nil
}

// DescribeMismatches returns one line per comparison that did not match,
// e.g. "sd_d: rerun 1.23 vs published 1.17, difference 0.06 > allowed 0.005".
// Numbers are in their Display form, so a line stays short however long the
// exact difference is ("difference ≈1.7976931348623157e308").
func DescribeMismatches(cs []Comparison) []string {
	var lines []string
	for _, c := range cs {
		if !c.Match {
			lines = append(lines, fmt.Sprintf("%s: rerun %s vs published %s, difference %s > allowed %s",
				c.Name, c.Rerun, c.Published, c.Difference, c.Allowed))
		}
	}
	return lines
}
