package scaffold

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/lazyre"
)

var numberRE = lazyre.New(`^-?(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$`)

// HalfUnit is half a unit in the last printed digit of a published value,
// computed exactly on its decimal text (never through float64): the
// absolute tolerance within which every rerun value that rounds to the
// printed one lies. 2.76 → 0.005, 2.760 → 0.0005, 12 → 0.5, 0.05 → 0.005,
// -3.14 → 0.005. In exponent form the last printed digit is the mantissa's:
// 1.5e-3 → 0.00005 (half of 1e-4), 1e10 → 5000000000 (one significant
// digit), 1.00e10 → 50000000. Trailing zeros of an integer count as printed
// digits: 1200 → 0.5.
func HalfUnit(text string) (dotlab.Decimal, error) {
	if err := dotlab.Decimal(text).Validate(); err != nil {
		return "", err
	}
	m := numberRE().FindStringSubmatch(text)
	exp := 0
	if m[3] != "" {
		exp, _ = strconv.Atoi(strings.TrimPrefix(m[3], "+"))
	}
	last := exp - len(m[2]) // the last printed digit is worth 10^last
	half := new(big.Rat).SetFrac64(1, 2)
	ten := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(last))), nil)
	if last >= 0 {
		half.Mul(half, new(big.Rat).SetInt(ten))
	} else {
		half.Quo(half, new(big.Rat).SetInt(ten))
	}
	return dotlab.DecimalFromRat(half), nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// proposeTargets turns each "NAME=VALUE" into a target with an absolute
// tolerance of half a unit in VALUE's last printed digit.
func proposeTargets(specs []string) ([]dotlab.Target, error) {
	targets := []dotlab.Target{}
	for _, s := range specs {
		name, value, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--target %q: want NAME=VALUE, the value as the paper prints it (e.g. did=2.76)", s)
		}
		value = strings.TrimSpace(value)
		tol, err := HalfUnit(value)
		if err != nil {
			return nil, fmt.Errorf("--target %s: %v (write the number as plain decimal text: no +, no decimal comma)", name, err)
		}
		targets = append(targets, dotlab.Target{Name: name, Value: dotlab.Decimal(value),
			Tolerance: dotlab.Tolerance{Type: dotlab.ToleranceAbsolute, Value: tol}})
	}
	return targets, nil
}

// parseSource reads one --source flag: NAME=PLACE:KIND:RULE, PLACE being
// stdout, stderr or an absolute file path under /work/out/ or
// /work/scratch/, and KIND:RULE one of regex:RE2 (group 1 is the number),
// json:$.path or csv:COLUMN:KEYCOLUMN=KEYVALUE.
func parseSource(s string) (string, *dotlab.TargetSource, error) {
	bad := func(why string) (string, *dotlab.TargetSource, error) {
		return "", nil, fmt.Errorf("--source %q: %s; want NAME=PLACE:KIND:RULE, e.g. did=stdout:regex:did\\s+([-0-9.eE]+), did=/work/out/coef.json:json:$.did or did=/work/out/t2.csv:csv:estimate:term=did", s, why)
	}
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return bad("no NAME=")
	}
	place, rest, _ := strings.Cut(rest, ":")
	kind, rule, _ := strings.Cut(rest, ":")
	src := &dotlab.TargetSource{}
	switch {
	case place == "stdout" || place == "stderr":
		src.Stream = place
	case strings.HasPrefix(place, "/"):
		src.File = place
	default:
		return bad("PLACE must be stdout, stderr or an absolute sandbox path: /work/out/FILE for what the analysis writes to its output directory, /work/scratch/FILE for what a package writes next to its code (sets scratch: true)")
	}
	if rule == "" {
		return bad("empty RULE")
	}
	switch kind {
	case "regex":
		src.Regex = rule
	case "json":
		src.JSON = rule
	case "csv":
		col, key, _ := strings.Cut(rule, ":")
		k, v, ok := strings.Cut(key, "=")
		if !ok || k == "" {
			return bad("csv needs COLUMN:KEYCOLUMN=KEYVALUE")
		}
		src.CSV = &dotlab.CSVCell{Column: col, Row: map[string]string{k: v}}
	default:
		return bad("KIND must be regex, json or csv")
	}
	return name, src, nil
}
