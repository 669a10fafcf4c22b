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
const MaxDecimalExponent = 1000

// MaxDecimalLength bounds the length of a Decimal's text, in bytes.
const MaxDecimalLength = 1000

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
	if !decimalRE.MatchString(string(d)) {
		return nil, fmt.Errorf("%.40q is not a JSON number", string(d))
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
// the prime factors 2 and 5 (always true for sums, differences and products
// of decimals), else rounded to 30 significant digits. Plain notation is
// used while it stays short (up to 30 digits after the point, 30 before);
// beyond that, scientific notation (e.g. 1.5e-120), so that extreme values
// never produce kilobytes of zeros.
func DecimalFromRat(r *big.Rat) Decimal {
	if r.Sign() == 0 {
		return "0"
	}
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
	exact := den.Cmp(big.NewInt(1)) == 0
	var digits string // significant digits, no sign
	var exp int       // value = 0.digits × 10^exp … expressed as digits × 10^(exp)
	neg := r.Sign() < 0
	abs := new(big.Rat).Abs(r)
	if exact {
		// abs × 10^places is an integer m: value = m × 10^-places.
		m := new(big.Int).Mul(abs.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(places)), nil))
		m.Quo(m, abs.Denom())
		digits = m.String()
		exp = -places
		for len(digits) > 1 && digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
			exp++
		}
	} else {
		f := new(big.Float).SetPrec(200).SetRat(abs)
		mant := f.Text('e', 29) // d.ddd…e±N
		m, e, _ := strings.Cut(mant, "e")
		n, _ := strconv.Atoi(e)
		digits = strings.TrimRight(strings.Replace(m, ".", "", 1), "0")
		if digits == "" {
			digits = "0"
		}
		exp = n - (len(digits) - 1)
	}
	sign := ""
	if neg {
		sign = "-"
	}
	// Plain notation when short enough.
	intDigits := len(digits) + exp // digits before the point
	if exp >= 0 && intDigits <= 30 {
		return Decimal(sign + digits + strings.Repeat("0", exp))
	}
	if exp < 0 && intDigits > 0 && -exp <= 30 {
		return Decimal(sign + digits[:intDigits] + "." + digits[intDigits:])
	}
	if exp < 0 && intDigits <= 0 && -exp <= 30 {
		return Decimal(sign + "0." + strings.Repeat("0", -intDigits) + digits)
	}
	// Scientific: d.ddd e N
	sci := digits[:1]
	if len(digits) > 1 {
		sci += "." + digits[1:]
	}
	return Decimal(fmt.Sprintf("%s%se%d", sign, sci, exp+len(digits)-1))
}
