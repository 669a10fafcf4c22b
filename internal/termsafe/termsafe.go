// Package termsafe shows text that others wrote (room messages, notes,
// rationales, names, titles, error details quoted from a server) on a
// terminal without letting it drive the terminal
// (docs/threat-model.md "Terminal escapes").
//
// A terminal obeys C0 controls (ESC starts CSI and OSC sequences that
// move the cursor, erase lines, retitle the window; CR returns to the
// start of the line and overwrites it), C1 controls (U+0080–U+009F; U+009B
// is a one-character CSI on some terminals), DEL, and Unicode's
// bidirectional formatting characters (Unicode Standard Annex #9: LRE,
// RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI, LRM, RLM, ALM), which reorder
// what is shown so that text reads differently from what it is. Text
// shows each of them, the line and paragraph separators U+2028/U+2029,
// and bytes that are not UTF-8, as a visible escape (\x1b, \r, \n, \t,
// \u007f, \u009b, \u202e, \xff); everything else is unchanged. DEL and
// the runes above it are written \uXXXX, so that inside a JSON string the
// escape is valid JSON for the same rune (Writer).
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafe reports the runes Text escapes.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// escape is the visible form of one unsafe rune.
func escape(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x20 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// Text returns s with every control, bidirectional formatting character
// and invalid UTF-8 byte shown escaped (see the package doc). Text of
// one line stays one line. It allocates only when s holds something to
// escape.
func Text(s string) string {
	clean := true
	for i, r := range s {
		if unsafe(r) || r == utf8.RuneError && badByte(s, i) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && badByte(s, i):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r):
			b.WriteString(escape(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// badByte reports whether s[i] starts no valid UTF-8 sequence (a literal
// U+FFFD in s is valid and kept).
func badByte(s string, i int) bool {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n == 1
}

// Lines is Text for a block of lines: newlines and tabs are kept, all else
// Text escapes is escaped. For output that the program lays out itself
// (tables, JSON) around fields it has not escaped one by one.
func Lines(s string) string {
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		fields := strings.Split(p, "\t")
		for j, f := range fields {
			fields[j] = Text(f)
		}
		parts[i] = strings.Join(fields, "\t")
	}
	return strings.Join(parts, "\n")
}

// Writer passes what is written to W with Lines' escapes: newlines and
// tabs kept, every other control, bidirectional formatting character and
// invalid byte escaped. Everything the dotlab command prints on its
// standard output goes through one (cmd/dotlab/main.go): tables, lines and
// JSON alike (encoding/json leaves C0 controls escaped already, and the
// \uXXXX escapes of the others are valid JSON). A UTF-8 sequence split
// across writes is held back until it is whole.
type Writer struct {
	W       io.Writer
	pending []byte
}

// Write escapes p and writes it; it reports len(p) on success.
func (w *Writer) Write(p []byte) (int, error) {
	b := append(w.pending, p...)
	w.pending = nil
	// hold back an incomplete rune at the end (at most 3 bytes)
	for k := 1; k <= 3 && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				w.pending = append([]byte(nil), b[len(b)-k:]...)
				b = b[:len(b)-k]
			}
			break
		}
	}
	if _, err := io.WriteString(w.W, Lines(string(b))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a held-back incomplete sequence, escaped.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	_, err := io.WriteString(w.W, Text(string(w.pending)))
	w.pending = nil
	return err
}
