package dotlab

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCutUncomparedSourceKeepsRunesWithinTheServerBound: a source longer
// than MaxUncomparedSource is cut on a rune boundary, so after the JSON
// round trip the server's checkUncomparedValues still accepts it.
func TestCutUncomparedSourceKeepsRunesWithinTheServerBound(t *testing.T) {
	cases := map[string]string{
		"2-byte runes (1024 × é)": TargetSource{Stream: "stdout", Regex: strings.Repeat("é", 1024)}.Where() + ", " + TargetSource{Stream: "stdout", Regex: strings.Repeat("é", 1024)}.Rule(),
		"3-byte runes":            strings.Repeat("€", 1000),
		"4-byte runes, offset":    "x" + strings.Repeat("𝄞", 600),
		"invalid bytes":           strings.Repeat("a\xff", 1500),
		"short":                   `stdout, regex "é"`,
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			got := CutUncomparedSource(s)
			if !utf8.ValidString(got) || len(got) > MaxUncomparedSource {
				t.Fatalf("cut to %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if len(s) <= MaxUncomparedSource && utf8.ValidString(s) && got != s {
				t.Fatalf("a short source changed: %q", got)
			}
			if len(s) > MaxUncomparedSource && (!strings.HasSuffix(got, "…") || len(got) < MaxUncomparedSource-6) {
				t.Fatalf("long source cut to %d bytes without the ellipsis or too short", len(got))
			}
			data, err := json.Marshal([]UncomparedValue{{Name: "t", Value: "1", Source: got}})
			if err != nil {
				t.Fatal(err)
			}
			b := RunBody{Outcome: OutcomeSpecIssue}
			if err := json.Unmarshal(data, &b.Uncompared); err != nil {
				t.Fatal(err)
			}
			if b.Uncompared[0].Source != got {
				t.Fatalf("JSON round trip changed the source (%d → %d bytes)", len(got), len(b.Uncompared[0].Source))
			}
			var p Problems
			b.checkUncomparedValues(&Manifest{Targets: []Target{{Name: "t"}}}, &p)
			if err := p.Err(); err != nil {
				t.Fatalf("server refuses: %v", ErrorDetail(err))
			}
		})
	}
}
