package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTextEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ümlauts, 中文, ✓":            "plain text, ümlauts, 中文, ✓",
		"vote\x1b[2K\x1b[1Areproduced":          `vote\x1b[2K\x1b[1Areproduced`,
		"false\rtrue ":                          `false\rtrue `,
		"two\nlines\tand tab":                   `two\nlines\tand tab`,
		"csi\u009b2J":                           `csi\u009b2J`,
		"del\x7f":                               `del\u007f`,
		"abc\u202edcba\u202c":                   `abc\u202edcba\u202c`,
		"isolate\u2066x\u2069 mark\u200f\u061c": `isolate\u2066x\u2069 mark\u200f\u061c`,
		"sep\u2028":                             `sep\u2028`,
		"bad \xff\xfe utf8":                     `bad \xff\xfe utf8`,
		"kept \ufffd":                           "kept \ufffd",
		"osc \x1b]0;title\x07":                  `osc \x1b]0;title\x07`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
		for _, r := range Text(in) {
			if unsafe(r) {
				t.Errorf("Text(%q) still holds %U", in, r)
			}
		}
	}
}

func TestLinesKeepsLayout(t *testing.T) {
	got := Lines("a\tb\x1b[31m\nc\rd\n")
	if want := "a\tb\\x1b[31m\nc\\rd\n"; got != want {
		t.Fatalf("Lines = %q, want %q", got, want)
	}
	if strings.ContainsRune(got, '\x1b') {
		t.Fatal("ESC left")
	}
}

func TestWriterJSONAndSplitRunes(t *testing.T) {
	v := map[string]string{"rationale": "ok\x1b[2K\u202efake\u009b\x7f\r"}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	w := &Writer{W: &out}
	for i := range b { // one byte per write: runes arrive split
		if _, err := w.Write(b[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	safe := out.String()
	if Lines(safe) != safe || strings.ContainsAny(safe, "\x1b\u202e\u009b\x7f\r") {
		t.Fatalf("unsafe runes left in %q", safe)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(safe), &back); err != nil || back["rationale"] != v["rationale"] {
		t.Fatalf("decodes to %q (%v), want %q", back["rationale"], err, v["rationale"])
	}
}
