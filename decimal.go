package dotlab

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Decimal is a number kept as the decimal text it was written with in JSON
// (a manifest's target value, a results.json value, a run's rerun value).
// Comparisons are computed exactly on that text (docs/manifest-spec.md §6), so
// 1.1 vs 1.0 with absolute tolerance 0.1 matches, and 2^53+1 differs from 2^53.
//
// string(d) is the exact text; d.String() (and so every fmt verb and
// template) prints the bounded Display form. It marshals as a bare JSON
// number, the exact text, and unmarshals from one (a JSON string is
// rejected).
type Decimal string

var decimalRE = lazyRegexp(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// MaxDecimalExponent bounds |written exponent| of a Decimal (the N of
// "…eN"), zero included, so that every parser can hold the exponent in a
// small integer and a hostile "0e999999999" is refused as written.
const MaxDecimalExponent = 1000

// MaxDecimalLength bounds the length of a Decimal's text, in bytes.
const MaxDecimalLength = 1000

// Bounds on a nonzero Decimal's magnitude, by its adjusted exponent: the e of
// the value written in normalised scientific notation d.ddd×10^e (1 ≤ d < 10),
// so 0.00123 has e = −3 and 1500 has e = 3 however they are spelled. Zero
// (any spelling: 0, -0, 0.000, 0e5) has no magnitude and is always in range.
// A nonzero value is accepted iff
//
//	MinDecimalAdjustedExponent ≤ e ≤ MaxDecimalAdjustedExponent and |value| ≤ math.MaxFloat64,
//
// that is 1e-308 ≤ |value| ≤ 2^1024 − 2^971 ≈ 1.7976931348623157e308, so that
// every accepted value is a finite, nonzero IEEE 754 double (R, numpy,
// JavaScript and Go read it without overflow or flush to zero) and exact
// arithmetic on it stays small. 9.99e308 has e = 308 but is beyond
// math.MaxFloat64 and is refused; 1e-309 is refused although doubles reach
// 5e-324, since below 2.2e-308 they lose precision.
const (
	MinDecimalAdjustedExponent = -308
	MaxDecimalAdjustedExponent = 308
)

// ErrDecimalRange is wrapped by Validate's error for a number whose magnitude
// is outside the bounds above.
var ErrDecimalRange = errors.New("number out of range")

// Display bounds: see Decimal.Display.
const (
	// DisplayMaxLength is the longest text Display returns unchanged, in
	// bytes. Display's result is at most 26 characters (28 bytes: "≈" is
	// three) for any value whose adjusted exponent has at most four digits,
	// which holds for every validated value and every value computed from
	// them.
	DisplayMaxLength = 24
	// DisplayDigits is the number of significant digits Display keeps when
	// it must shorten a value: enough for any float64 to round-trip.
	DisplayDigits = 17
)

// maxFloat64 is math.MaxFloat64 as an exact rational.
func maxFloat64() *big.Rat { return new(big.Rat).SetFloat64(math.MaxFloat64) }

// parts splits a match of decimalRE into its sign, its significant digits
// (no leading or trailing zeros; "" for zero) and exp, so that
// |value| = digits × 10^exp. ok is false when the written exponent exceeds
// ±10^9 (only possible for text that Validate refuses).
func parts(m []string) (neg bool, digits string, exp int, ok bool) {
	neg = strings.HasPrefix(m[0], "-")
	if m[3] != "" {
		w := strings.TrimLeft(m[3][1:], "+")
		e, err := strconv.Atoi(w)
		if err != nil || e > 1e9 || e < -1e9 {
			return neg, "", 0, false
		}
		exp = e
	}
	frac := strings.TrimPrefix(m[2], ".")
	digits = strings.TrimLeft(m[1]+frac, "0")
	exp -= len(frac)
	n := len(digits)
	digits = strings.TrimRight(digits, "0")
	exp += n - len(digits)
	return neg, digits, exp, true
}

// Validate reports whether d is a JSON number within MaxDecimalLength,
// MaxDecimalExponent and the magnitude bounds (MinDecimalAdjustedExponent,
// MaxDecimalAdjustedExponent, math.MaxFloat64). A magnitude error wraps
// ErrDecimalRange. Messages show the value in its Display form, so that they
// stay short for any input.
func (d Decimal) Validate() error {
	s := string(d)
	if len(s) > MaxDecimalLength {
		return fmt.Errorf("number is %d characters long; at most %d are accepted", len(s), MaxDecimalLength)
	}
	m := decimalRE().FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("%q is not a JSON number", clip(s))
	}
	_, digits, exp, ok := parts(m)
	if m[3] != "" {
		e, err := strconv.Atoi(strings.TrimLeft(m[3][1:], "+"))
		if !ok || err != nil || e > MaxDecimalExponent || e < -MaxDecimalExponent {
			return fmt.Errorf("written exponent of %s is outside ±%d: write the number with a smaller exponent", clip(s), MaxDecimalExponent)
		}
	}
	if digits == "" {
		return nil // zero
	}
	adj := exp + len(digits) - 1
	tooLarge := adj > MaxDecimalAdjustedExponent
	if adj == MaxDecimalAdjustedExponent {
		r, _ := new(big.Rat).SetString(digits + "e" + strconv.Itoa(exp))
		tooLarge = r.Cmp(maxFloat64()) > 0
	}
	switch {
	case tooLarge:
		return fmt.Errorf("%w: %s is too large: a number's magnitude must be at most 1.7976931348623157e308 (math.MaxFloat64, the largest finite IEEE 754 double), so that every reader gets a finite value; report it in other units", ErrDecimalRange, d.Display())
	case adj < MinDecimalAdjustedExponent:
		return fmt.Errorf("%w: %s is too close to zero: a nonzero number's magnitude must be at least 1e-308 (adjusted exponent ≥ %d, the decimal range of IEEE 754 doubles); write 0 for zero, or report it in other units", ErrDecimalRange, d.Display(), MinDecimalAdjustedExponent)
	}
	return nil
}

// clip shortens text for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Rat returns the exact rational value of d, or Validate's error.
func (d Decimal) Rat() (*big.Rat, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	r, ok := new(big.Rat).SetString(string(d))
	if !ok {
		return nil, fmt.Errorf("%q is not a number", clip(string(d)))
	}
	return r, nil
}

// Float64 returns the nearest float64 (for display and sorting only; never
// for deciding a match). A value that passes Validate is finite; a computed
// value such as a difference of 1.5e308 and -1.5e308 may be ±Inf.
func (d Decimal) Float64() float64 {
	f, _ := strconv.ParseFloat(string(d), 64)
	return f
}

// String returns d.Display(), so that fmt and templates never print an
// unbounded number; string(d) is the exact text.
func (d Decimal) String() string { return d.Display() }

// Display returns d for people to read, bounded in length whatever d holds:
//   - the text as written when it is at most DisplayMaxLength bytes
//     ("1.50", "1e-300", "0.00050000000001");
//   - else the value rounded (half to even) to DisplayDigits significant
//     digits, marked "≈" when that dropped digits, in plain notation when
//     that fits in DisplayMaxLength bytes and in scientific notation
//     d.ddde±N otherwise: a 312-digit difference
//     179769313486231569…95.938 shows as "≈1.7976931348623157e308";
//   - text that is not a JSON number (never a validated Decimal) is clipped
//     to 40 bytes and "…".
//
// It works on the decimal text, never through float64, so a computed value
// beyond the double range (2e308, 1e-616) still shows as written.
func (d Decimal) Display() string {
	s := string(d)
	if len(s) <= DisplayMaxLength {
		return s
	}
	m := decimalRE().FindStringSubmatch(s)
	if m == nil {
		return clip(s)
	}
	neg, digits, exp, ok := parts(m)
	if !ok {
		return clip(s)
	}
	if digits == "" {
		return "0"
	}
	approx := ""
	if len(digits) > DisplayDigits {
		digits, exp = roundHalfEven(digits, exp, DisplayDigits)
		approx = "≈"
	}
	sign := ""
	if neg {
		sign = "-"
	}
	if p := plain(digits, exp); len(sign)+len(p) <= DisplayMaxLength {
		return approx + sign + p
	}
	return approx + sign + scientific(digits, exp)
}

// roundHalfEven rounds digits × 10^exp (digits without leading zeros, longer
// than n) to n significant digits and strips trailing zeros.
func roundHalfEven(digits string, exp, n int) (string, int) {
	keep, rest := []byte(digits[:n]), digits[n:]
	up := rest[0] > '5' || rest[0] == '5' && (strings.TrimRight(rest[1:], "0") != "" || (keep[n-1]-'0')%2 == 1)
	exp += len(rest)
	if up {
		i := n - 1
		for ; i >= 0 && keep[i] == '9'; i-- {
			keep[i] = '0'
		}
		if i < 0 {
			keep = append([]byte{'1'}, keep[:n-1]...)
			exp++
		} else {
			keep[i]++
		}
	}
	out := strings.TrimRight(string(keep), "0")
	return out, exp + n - len(out)
}

// plain writes digits × 10^exp without an exponent.
func plain(digits string, exp int) string {
	intDigits := len(digits) + exp
	switch {
	case exp >= 0:
		return digits + strings.Repeat("0", exp)
	case intDigits > 0:
		return digits[:intDigits] + "." + digits[intDigits:]
	default:
		return "0." + strings.Repeat("0", -intDigits) + digits
	}
}

// scientific writes digits × 10^exp as d.ddde±N (1.5e-120, 2e308).
func scientific(digits string, exp int) string {
	sci := digits[:1]
	if len(digits) > 1 {
		sci += "." + digits[1:]
	}
	return fmt.Sprintf("%se%d", sci, exp+len(digits)-1)
}

// MarshalJSON writes d as a bare JSON number, its exact text; an empty
// Decimal is null.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d == "" {
		return []byte("null"), nil
	}
	if !decimalRE().MatchString(string(d)) {
		return nil, fmt.Errorf("%.40q is not a JSON number", string(d))
	}
	return []byte(d), nil
}

// UnmarshalJSON accepts a bare JSON number only. Length, exponent and
// magnitude bounds are checked later by Validate or Rat, where the caller
// knows the JSON path.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*d = ""
		return nil
	}
	if !decimalRE().MatchString(s) {
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
// never produce kilobytes of zeros. The result is the exact record of a
// computed value, so it is not held to Validate's bounds: a difference of two
// in-range values may reach about 3.6e308 or carry some 1600 digits, and a
// relative tolerance's allowed value may reach 1e±616. Show it with Display.
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
	if (exp >= 0 && intDigits <= 30) || (exp < 0 && -exp <= 30) {
		return Decimal(sign + plain(digits, exp))
	}
	return Decimal(sign + scientific(digits, exp))
}
