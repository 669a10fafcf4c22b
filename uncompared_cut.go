package dotlab

import (
	"strings"
	"unicode/utf8"
)

// CutUncomparedSource returns s as valid UTF-8 of at most
// MaxUncomparedSource bytes, the bound checkUncomparedValues applies
// (uncompared.go): invalid bytes become U+FFFD first (what encoding/json
// writes for them, so the bound holds for the body the server decodes),
// then a longer text is cut on a rune boundary and ends in "…", within the
// bound.
func CutUncomparedSource(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxUncomparedSource {
		return s
	}
	const ellipsis = "…"
	n := MaxUncomparedSource - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}
