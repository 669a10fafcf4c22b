package dotlab

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// Decimal is a number kept as the decimal text it was written with in JSON
// (a manifest's target value, a results.json value, a run's rerun value).
// Comparisons are computed exactly on that text (DESIGN.md "Comparison"), so
// 1.1 vs 1.0 with absolute tolerance 0.1 matches, and 2^53+1 differs from 2^53.
//
// It marshals as a bare JSON number and unmarshals from one (a JSON string is
// rejected).
type Decimal string

var decimalRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// MaxDecimalExponent bounds |exponent| of a Decimal, so that a hostile
// "1e999999999" cannot make exact arithmetic allocate without limit. It is far
// beyond any float64 (whose range ends near 1e308).
const MaxDecimalExponent = 400

// MaxDecimalLength bounds the length of a Decimal's text, in bytes.
const MaxDecimalLength = 400

// Validate reports whether d is a JSON number within the length and exponent
// bounds.
func (d Decimal) Validate() error {
	s := string(d)
	if len(s) > MaxDecimalLength {
		return fmt.Errorf("number is %d characters long; at most %d are accepted", len(s), MaxDecimalLength)
	}
	m := decimalRE.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("%q is not a JSON number", s)
	}
	if m[3] != "" {
		e, err := strconv.Atoi(strings.TrimLeft(m[3][1:], "+"))
		if err != nil || e > MaxDecimalExponent || e < -MaxDecimalExponent {
			return fmt.Errorf("exponent of %s is outside ±%d", s, MaxDecimalExponent)
		}
	}
	return nil
}

// Rat returns the exact rational value of d.
func (d Decimal) Rat() (*big.Rat, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	r, ok := new(big.Rat).SetString(string(d))
	if !ok {
		return nil, fmt.Errorf("%q is not a number", string(d))
	}
	return r, nil
}

// Float64 returns the nearest float64 (for display and sorting only; never
// for deciding a match).
func (d Decimal) Float64() float64 {
	f, _ := strconv.ParseFloat(string(d), 64)
	return f
}

// String returns the decimal text.
func (d Decimal) String() string { return string(d) }

// MarshalJSON writes d as a bare JSON number; an empty Decimal is null.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d == "" {
		return []byte("null"), nil
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return []byte(d), nil
}

// UnmarshalJSON accepts a bare JSON number only. Length and exponent bounds
// are checked later by Validate or Rat, where the caller knows the JSON path.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*d = ""
		return nil
	}
	if !decimalRE.MatchString(s) {
		return fmt.Errorf("%.40s is not a JSON number", s)
	}
	*d = Decimal(s)
	return nil
}

// DecimalFromRat writes r as an exact decimal when its denominator has only
// the prime factors 2 and 5 (always true for sums, differences and products of
// decimals), else rounded to 30 places.
func DecimalFromRat(r *big.Rat) Decimal {
	den := new(big.Int).Set(r.Denom())
	var rem big.Int
	count := func(p int64) int {
		n, q := 0, big.NewInt(p)
		for {
			var quo big.Int
			quo.QuoRem(den, q, &rem)
			if rem.Sign() != 0 {
				return n
			}
			den.Set(&quo)
			n++
		}
	}
	places := max(count(2), count(5))
	if den.Cmp(big.NewInt(1)) != 0 {
		places = 30
	}
	s := r.FloatString(places)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return Decimal(s)
}
