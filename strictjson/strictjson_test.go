package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseRejects(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"duplicate key":       {`{"a":1,"a":2}`, `$.a: duplicate key "a"`},
		"case-variant key":    {`{"title":"x","Title":"y"}`, `differs from key "title" only in case`},
		"trailing data":       {`{"a":1} {"b":2}`, "trailing data"},
		"trailing garbage":    {`[1,2]x`, "trailing data"},
		"invalid UTF-8":       {"{\"a\":\"\xff\"}", "invalid UTF-8 at byte offset 6"},
		"too deep":            {strings.Repeat("[", 40) + strings.Repeat("]", 40), "nested deeper than 32"},
		"empty":               {"  ", "empty document"},
		"unterminated":        {`{"a":`, "unexpected end"},
		"NaN is not JSON":     {`{"a":NaN}`, "invalid character"},
		"nested duplicate":    {`{"x":[{"k":1,"k":1}]}`, `$.x[0].k: duplicate key`},
		"odd key path quoted": {`{"a b":{"c":1,"c":2}}`, `$["a b"].c: duplicate key`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse(%q) error = %v, want it to contain %q", c.in, err, c.want)
			}
		})
	}
}

func TestParseKeepsNumberText(t *testing.T) {
	v, err := Parse([]byte(`{"a":1e-400,"b":9007199254740993,"c":1.50}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	for k, want := range map[string]string{"a": "1e-400", "b": "9007199254740993", "c": "1.50"} {
		if got := m[k].(json.Number).String(); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
}

func TestParseSizeLimit(t *testing.T) {
	_, err := ParseLimits([]byte(`"`+strings.Repeat("x", 100)+`"`), Limits{MaxBytes: 50, MaxDepth: 4})
	if err == nil || !strings.Contains(err.Error(), "at most 50") {
		t.Fatalf("err = %v", err)
	}
}

type inner struct {
	Name string `json:"name"`
}
type outer struct {
	Items []inner          `json:"items"`
	Map   map[string]inner `json:"map"`
	N     int              `json:"n"`
}

func TestDecodeUnknownAndCaseVariantFields(t *testing.T) {
	var o outer
	err := Decode([]byte(`{"Items":[],"items":[{"name":"a","nmae":"b"}],"map":{"k":{"Name":"x"}}}`), &o)
	if err == nil {
		t.Fatal("Decode accepted unknown fields")
	}
	got := err.(*ProblemsError).Problems
	want := []string{`$.Items: unknown field`, `$.items[0].nmae: unknown field`, `$.map.k.Name: unknown field`}
	// "Items" and "items" clash first: the strict parser rejects that before field checks.
	if !strings.Contains(got[0], "only in case") {
		if len(got) != len(want) {
			t.Fatalf("problems = %q", got)
		}
	}
	err = Decode([]byte(`{"items":[{"name":"a","nmae":"b"}],"map":{"k":{"Name":"x"}}}`), &o)
	got = err.(*ProblemsError).Problems
	if len(got) != 2 || !strings.HasPrefix(got[0], want[1]) || !strings.HasPrefix(got[1], want[2]) {
		t.Fatalf("problems = %q", got)
	}
	err = Decode([]byte(`{"n":"seven"}`), &o)
	if err == nil || !strings.Contains(err.Error(), "$.n: expected an integer") {
		t.Fatalf("type error = %v", err)
	}
	if err := Decode([]byte(`{"items":[{"name":"a"}],"n":3}`), &o); err != nil || o.N != 3 || o.Items[0].Name != "a" {
		t.Fatalf("valid decode: %v %+v", err, o)
	}
}

// TestDecodeRest: the values that do not fit are each named and left at
// their zero value; the rest decodes, so that a caller can check it too.
func TestDecodeRest(t *testing.T) {
	type inner struct {
		Seed *int `json:"seed"`
		Name string
	}
	type body struct {
		Outcome string         `json:"outcome"`
		Env     inner          `json:"environment"`
		Hashes  map[string]int `json:"hashes"`
		List    []int          `json:"list"`
		Keep    string         `json:"keep"`
	}
	var b body
	rest, err := DecodeRest([]byte(`{"outcome": 3, "environment": {"seed": "seven", "Name": "n"}, "hashes": {"a": 1, "b": "x"},
		"list": [1, "two", 3], "keep": "kept", "extra": true}`), DefaultLimits, &b)
	var pe *ProblemsError
	if !errors.As(err, &pe) || !rest {
		t.Fatalf("rest %v, err %v", rest, err)
	}
	want := []string{`$.environment.seed: expected an integer, got a string`, `$.extra: unknown field`, `$.hashes.b: expected an integer, got a string`,
		`$.list[1]: expected an integer, got a string`, `$.outcome: expected a string, got a number`}
	if len(pe.Problems) != len(want) {
		t.Fatalf("problems %q", pe.Problems)
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(pe.Problems, "\n"), w) {
			t.Errorf("no problem %q in %q", w, pe.Problems)
		}
	}
	if b.Keep != "kept" || b.Env.Name != "n" || b.Env.Seed != nil || b.Outcome != "" || len(b.Hashes) != 1 || b.Hashes["a"] != 1 ||
		len(b.List) != 3 || b.List[0] != 1 || b.List[1] != 0 || b.List[2] != 3 {
		t.Fatalf("the rest: %+v", b)
	}
	// Not JSON: nothing decodes.
	if rest, err := DecodeRest([]byte(`{"keep": `), DefaultLimits, &b); rest || err == nil {
		t.Fatalf("broken JSON: rest %v err %v", rest, err)
	}
	// The root of another type: nothing to keep.
	if rest, err := DecodeRest([]byte(`[1]`), DefaultLimits, &body{}); rest || err == nil {
		t.Fatalf("an array for an object: rest %v err %v", rest, err)
	}
}
