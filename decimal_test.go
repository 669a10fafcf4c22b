package dotlab_test

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// TestDecimalRange is the table of the magnitude rule: a nonzero value is
// accepted iff 1e-308 ≤ |value| ≤ math.MaxFloat64, however it is spelled;
// zero is accepted with any written exponent within ±1000.
func TestDecimalRange(t *testing.T) {
	zeros := strings.Repeat
	const (
		ok       = "ok"
		rng      = "range"    // wraps ErrDecimalRange
		written  = "exponent" // written exponent beyond ±1000
		tooLong  = "length"
		notJSON  = "syntax"
		tooLarge = "1.7976931348623157e308"
		tooSmall = "1e-308"
	)
	for _, c := range []struct{ in, want, names string }{
		{"1e308", ok, ""},
		{"-1e308", ok, ""},
		{"1E+308", ok, ""},
		{"1e309", rng, tooLarge},
		{"-1e309", rng, tooLarge},
		{"9.99e308", rng, tooLarge}, // adjusted exponent 308, but beyond MaxFloat64
		{"1.7976931348623157e308", ok, ""},
		{"-1.7976931348623157e308", ok, ""},
		{"17976931348623157e292", ok, ""},
		{"1.79769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368e308", ok, ""},         // exactly math.MaxFloat64
		{"1.797693134862315708145274237317043567980705675258449965989174768031572607800285387605895586327668781715404589535143824642343213268894641827684675467035375169860499105765512820762454900903893289440758685084551339423045832369032229481658085593321233482747978262041447231687381771809192998812504040261841248583681e308", rng, tooLarge}, // one unit above it
		{"1.7976931348623158e308", rng, tooLarge}, // rounds to MaxFloat64 in ParseFloat, but is above it
		{"1e400", rng, tooLarge},
		{"-1e400", rng, tooLarge},
		{"1e-308", ok, ""},
		{"-1e-308", ok, ""},
		{"9.99e-308", ok, ""},
		{"1e-309", rng, tooSmall},
		{"-9.99e-309", rng, tooSmall},
		{"5e-324", rng, tooSmall}, // a subnormal double: refused
		{"1e-400", rng, tooSmall},
		// Zero has no magnitude; its written exponent is still bounded.
		{"0", ok, ""},
		{"-0", ok, ""},
		{"0.000", ok, ""},
		{"0e1000", ok, ""},
		{"-0.0e-1000", ok, ""},
		{"0e1001", written, "±1000"},
		{"0e999999", written, "±1000"},
		{"0e99999999999999999999999", written, "±1000"},
		// Written out in full: the magnitude counts, not the written exponent.
		{"0." + zeros("0", 307) + "1", ok, ""},        // 1e-308
		{"0." + zeros("0", 308) + "1", rng, tooSmall}, // 1e-309
		{"0." + zeros("0", 900) + "1", rng, tooSmall}, // 1e-901
		{"1" + zeros("0", 308), ok, ""},               // 309 digits: 1e308
		{"-1" + zeros("0", 308), ok, ""},              //
		{"1" + zeros("0", 309), rng, tooLarge},        // 310 digits: 1e309
		{"1" + zeros("0", 900), rng, tooLarge},        // 1e900
		{"1000e305", ok, ""},                          // 1e308
		{"0.001e311", ok, ""},                         // 1e308
		{"0.001e312", rng, tooLarge},                  // 1e309
		{"10000e-312", ok, ""},                        // 1e-308
		{"0.01e-307", rng, tooSmall},                  // 1e-309
		{"1e-1000", rng, tooSmall},                    //
		{"1e1000", rng, tooLarge},                     //
		{"1e1001", written, "±1000"},                  //
		{"1." + zeros("7", 990), ok, ""},              // long but in range
		{"1." + zeros("7", 999), tooLong, "1000"},     //
		{"NaN", notJSON, ""}, {"Infinity", notJSON, ""}, {"0x10", notJSON, ""}, {"01", notJSON, ""},
	} {
		err := dotlab.Decimal(c.in).Validate()
		label := c.in
		if len(label) > 30 {
			label = label[:30] + "…"
		}
		switch {
		case c.want == ok:
			if err != nil {
				t.Errorf("%s: %v", label, err)
				continue
			}
			// Every accepted value is a finite double, nonzero unless zero.
			f, perr := strconv.ParseFloat(c.in, 64)
			r, _ := dotlab.Decimal(c.in).Rat()
			if perr != nil || math.IsInf(f, 0) || (f == 0) != (r.Sign() == 0) {
				t.Errorf("%s: accepted but float64 reads %v (%v)", label, f, perr)
			}
		case err == nil:
			t.Errorf("%s: accepted, want %s error", label, c.want)
		case (c.want == rng) != errors.Is(err, dotlab.ErrDecimalRange):
			t.Errorf("%s: error %v, want kind %s", label, err, c.want)
		case !strings.Contains(err.Error(), c.names):
			t.Errorf("%s: error %q does not name %q", label, err, c.names)
		case len(err.Error()) > 400:
			t.Errorf("%s: error is %d bytes long", label, len(err.Error()))
		}
	}
}

// TestTargetOutOfRangeRefusedAtValidation: a manifest whose target value or
// tolerance is outside the range is refused, naming the field and the bound.
// 5e-324 and 1e-310 pass the RFC 8785 identity rule (they are doubles), so
// only the range rule refuses them.
func TestTargetOutOfRangeRefusedAtValidation(t *testing.T) {
	b, err := os.ReadFile("manifest/testdata/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	valid := string(b)
	if _, err := manifest.Parse(b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, path, bound string }{
		{`"value": 4.062`, `"value": 5e-324`, "$.targets[0].value", "1e-308"},
		{`"value": 4.062`, `"value": 1e-310`, "$.targets[0].value", "1e-308"},
		{`"value": 4.062`, `"value": 1e400`, "$.targets[0].value", "1.7976931348623157e308"},
		{`"value": 0.0005`, `"value": 1e-309`, "$.targets[0].tolerance.value", "1e-308"},
		{`"value": 0.0005`, `"value": 1e309`, "$.targets[0].tolerance.value", "1.7976931348623157e308"},
	} {
		_, err := manifest.Parse([]byte(strings.Replace(valid, c.old, c.new, 1)))
		d := dotlab.ErrorDetail(err)
		if dotlab.ErrorCode(err) != dotlab.EINVALID || len(d) == 0 || !strings.HasPrefix(d[0], c.path+": ") || !strings.Contains(d[0], c.bound) {
			t.Errorf("%s: err = %v", c.new, err)
		}
	}
	// The edges themselves are accepted.
	for _, v := range []string{"1e-308", "1.7976931348623157e308", "-1.7976931348623157e308"} {
		if _, err := manifest.Parse([]byte(strings.Replace(valid, `"value": 4.062`, `"value": `+v, 1))); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestDecimalDisplay(t *testing.T) {
	maxF := "1.7976931348623157e308"
	for _, c := range []struct{ in, want string }{
		{"1.50", "1.50"},                         // as written
		{"1e-300", "1e-300"},                     //
		{"0.00050000000001", "0.00050000000001"}, //
		{"2e308", "2e308"},                       // a computed value beyond the double range
		{"1e-616", "1e-616"},                     //
		{"123456789012345678901234", "123456789012345678901234"},  // 24 bytes: as written
		{"1" + strings.Repeat("0", 400), "1e400"},                 // exact, no rounding needed
		{"-1" + strings.Repeat("0", 308), "-1e308"},               //
		{"0.000000000000000000000000000001", "1e-30"},             // plain would be 32 bytes
		{"1234567890123456789012345", "≈1.2345678901234568e24"},   // rounded to 17 digits
		{"1234567890.12345678901234567", "≈1234567890.1234568"},   // plain still fits
		{"9.99999999999999999999999", "≈10"},                      // carry into a new digit
		{"-9.99999999999999999999999e307", "≈-1e308"},             //
		{"1.0000000000000000500000000", "≈1"},                     // half to even: down
		{"1.0000000000000001500000000", "≈1.0000000000000002"},    // half to even: up
		{"1.00000000000000005000000001", "≈1.0000000000000001"},   // above half: up
		{"0.0000000000000000000000000000", "0"},                   // a long zero
		{"-0.000000000000000000000000000000e5", "0"},              //
		{strings.Repeat("x", 100), strings.Repeat("x", 40) + "…"}, // not a number
		{"1e" + strings.Repeat("9", 40), "1e" + strings.Repeat("9", 38) + "…"},
		{"-1.2345678901234567890123e-1303", "≈-1.2345678901234568e-1303"}, // the longest display: 26 characters
		{"", ""},
	} {
		if got := dotlab.Decimal(c.in).Display(); got != c.want {
			t.Errorf("Display(%.40s) = %s, want %s", c.in, got, c.want)
		}
	}
	// The 312-digit difference of the finding: 1.7976931348623157e308 − 4.062.
	c, err := dotlab.Compare(dotlab.Target{Name: "x", Value: "4.062", Tolerance: dotlab.Tolerance{Type: "absolute", Value: "0.0005"}}, dotlab.Decimal(maxF))
	if err != nil {
		t.Fatal(err)
	}
	if len(string(c.Difference)) < 300 || c.Difference.Display() != "≈"+maxF || c.Difference.String() != "≈"+maxF {
		t.Fatalf("difference %d bytes, displays as %s", len(string(c.Difference)), c.Difference)
	}
}

// TestDecimalDisplayBounded: for random numbers of every length and
// exponent, Display is short and within half a unit of the 17th digit.
func TestDecimalDisplayBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 9))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		return string(b)
	}
	for i := 0; i < 3000; i++ {
		s := ""
		if rng.IntN(2) == 0 {
			s = "-"
		}
		s += "1" + digits(rng.IntN(400)*rng.IntN(2)) // half with one integer digit
		if rng.IntN(2) == 0 {
			s += "." + digits(1+rng.IntN(400))
		}
		if rng.IntN(2) == 0 {
			s += "e" + strconv.Itoa(rng.IntN(2801)-1400)
		}
		got := dotlab.Decimal(s).Display()
		if n := utf8.RuneCountInString(got); n > 26 || len(got) > 28 {
			t.Fatalf("Display(%.60s…) = %s: %d runes", s, got, n)
		}
		exact, _ := new(big.Rat).SetString(s)
		shown, ok := new(big.Rat).SetString(strings.TrimPrefix(got, "≈"))
		if !ok {
			t.Fatalf("Display(%.60s…) = %s is not a number", s, got)
		}
		if !strings.HasPrefix(got, "≈") {
			if shown.Cmp(exact) != 0 {
				t.Fatalf("Display(%.60s…) = %s without ≈ but not exact", s, got)
			}
			continue
		}
		// |shown − exact| ≤ |exact| × 10^-16 (half a unit in the 17th digit is 5e-17 of the leading digit's unit).
		err := new(big.Rat).Sub(shown, exact)
		err.Abs(err)
		bound := new(big.Rat).Mul(new(big.Rat).Abs(exact), big.NewRat(1, 1e16))
		if err.Cmp(bound) > 0 {
			t.Fatalf("Display(%.60s…) = %s is too far from the value", s, got)
		}
	}
}
