package dotlab_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

// TestOutputListingRoundTrip: names with quotes, backslashes, controls,
// non-ASCII and U+2028 encode in RFC 8785 form (what json.Marshal of the
// line gives, minus its HTML and U+2028 escapes) and parse back to the
// same hashes; the pin is the listing's hash, count and length.
func TestOutputListingRoundTrip(t *testing.T) {
	h := strings.Repeat("a", 64)
	in := map[string]string{"results.json": h, `a"b\c`: h, "tab\there\n": h, "ü/ß.csv": h, "line\u2028sep": h, "<html>&": h, "\x01\x1f": h}
	data, pin, err := dotlab.EncodeOutputListing(in)
	if err != nil {
		t.Fatal(err)
	}
	if pin.Count != len(in) || pin.Bytes != int64(len(data)) || len(pin.SHA256) != 64 {
		t.Fatalf("pin %+v for %d bytes", pin, len(data))
	}
	for _, want := range []string{`{"name":"a\"b\\c",`, `"tab\there\n"`, "line\u2028sep", `"<html>&"`, `"\u0001\u001f"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("listing lacks %q:\n%s", want, data)
		}
	}
	back, err := dotlab.ParseOutputListing(data)
	if err != nil || !maps.Equal(back, in) {
		t.Fatalf("parsed back %v, %v", back, err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var v map[string]string
		if err := json.Unmarshal([]byte(line), &v); err != nil || in[v["name"]] != h {
			t.Errorf("line %q is not JSON of an input entry: %v", line, err)
		}
	}
}

// TestOutputListingRefusesNonCanonical: every way the same hashes could be
// written otherwise is refused, naming the line, so one set of hashes has
// one listing and one SHA-256.
func TestOutputListingRefusesNonCanonical(t *testing.T) {
	h := strings.Repeat("b", 64)
	line := func(name string) string { return `{"name":"` + name + `","sha256":"` + h + `"}` + "\n" }
	for name, data := range map[string]string{
		"out of order":    line("b") + line("a"),
		"repeated":        line("a") + line("a"),
		"space":           `{"name": "a","sha256":"` + h + `"}` + "\n",
		"keys reversed":   `{"sha256":"` + h + `","name":"a"}` + "\n",
		"escaped letter":  line(`\u0061`),
		"upper escape":    line(`\u001F`),
		"extra field":     `{"name":"a","sha256":"` + h + `","x":1}` + "\n",
		"no newline":      strings.TrimSuffix(line("a"), "\n"),
		"upper hex":       `{"name":"a","sha256":"` + strings.Repeat("B", 64) + `"}` + "\n",
		"empty name":      line(""),
		"invalid UTF-8":   line("\xff"),
		"duplicate key":   `{"name":"a","name":"a","sha256":"` + h + `"}` + "\n",
		"blank line":      line("a") + "\n",
		"escaped slash":   line(`a\/b`),
		"case of the key": `{"Name":"a","sha256":"` + h + `"}` + "\n",
	} {
		if _, err := dotlab.ParseOutputListing([]byte(data)); dotlab.ErrorCode(err) != dotlab.EINVALID {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	big := map[string]string{"x": h}
	if _, _, err := dotlab.EncodeOutputListing(map[string]string{strings.Repeat("n", dotlab.MaxOutputNameBytes+1): h}); dotlab.ErrorCode(err) != dotlab.EINVALID {
		t.Errorf("long name: %v", err)
	}
	if _, err := dotlab.ParseOutputListing(make([]byte, dotlab.MaxOutputListingBytes+1)); dotlab.ErrorCode(err) != dotlab.ETOOLARGE {
		t.Errorf("over the bytes: %v", err)
	}
	if _, _, err := dotlab.EncodeOutputListing(big); err != nil {
		t.Errorf("one entry: %v", err)
	}
}
