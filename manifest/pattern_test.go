package manifest

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/dotlab/dotlab/spec"
)

// schemaPatterns collects every "pattern" string of the manifest schema.
func schemaPatterns(t *testing.T) []string {
	var doc any
	if err := json.Unmarshal(spec.ManifestSchema, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			for k, c := range n {
				if s, ok := c.(string); ok && k == "pattern" {
					out = append(out, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range n {
				walk(c)
			}
		}
	}
	walk(doc)
	return out
}

// The lazy engine refuses what regexp.Compile refuses, hands out one matcher
// per pattern, and matches as regexp does; every pattern of the schema
// compiles (the deferred regexp.MustCompile cannot panic).
func TestPatternEngineIsRegexp(t *testing.T) {
	e := patternEngine{}
	for _, bad := range []string{"(", "a{2,1}", `\8`, "[z-a]", "x**", "(?P<n-1>a)", `\pX`} {
		if _, want := regexp.Compile(bad); want == nil {
			t.Fatalf("%q: regexp accepts it; pick another", bad)
		}
		if _, err := e.compile(bad); err == nil {
			t.Errorf("%q: accepted, regexp.Compile refuses it", bad)
		}
	}
	pats := schemaPatterns(t)
	if len(pats) < 10 {
		t.Fatalf("found %d patterns in the schema", len(pats))
	}
	inputs := []string{"", "a", "sleep.csv", "../x", "https://x.org/a b", "0123456789abcdef0123456789abcdef01234567", "/work/out/x", "$x", "10.1234/abc", "é"}
	for _, p := range pats {
		want := regexp.MustCompile(p)
		got, err := e.compile(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if again, _ := e.compile(p); again != got {
			t.Errorf("%q: compiled twice", p)
		}
		if got.String() != p {
			t.Errorf("String() = %q, want %q", got.String(), p)
		}
		for _, in := range inputs {
			if got.MatchString(in) != want.MatchString(in) {
				t.Errorf("%q on %q: %v, regexp says %v", p, in, got.MatchString(in), want.MatchString(in))
			}
		}
	}
}
