package strictjson

import (
	"encoding/json"
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
