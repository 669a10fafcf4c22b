package leakcheck

import "strings"

// Bounds on what one gitleaks call sees (see pieces). Gitleaks' work per
// regex match grows with the length of the match's line (it copies the
// line into the finding, searches it for "gitleaks:allow" and runs the
// line-target allowlists over it) and with the number of lines before it
// (location), so one long line or one large text costs time quadratic in
// its size. Handing it bounded pieces makes the check linear.
const (
	// MaxLineBytes is the longest line gitleaks is given. A longer line is
	// cut into pieces of at most this size.
	MaxLineBytes = 4 << 10
	// LineOverlap is how many bytes consecutive pieces of a long line share
	// at least: a secret of up to this many bytes, with the context its
	// rule needs ("api_key = " before it), is seen whole in one piece.
	// Gitleaks' token rules match fewer than 300 bytes; longer secrets are
	// JWTs and one-line private keys, covered below.
	LineOverlap = 512
	// MaxFragmentBytes is the most text one gitleaks call scans; a larger
	// text is scanned in fragments of whole lines.
	MaxFragmentBytes = 64 << 10
	// FragmentOverlap is how many bytes of lines consecutive fragments share
	// at least, so that a multi-line PEM private key block of up to 8 KiB
	// (an RSA-8192 key is 6.5 KiB) is seen whole.
	FragmentOverlap = 8 << 10
)

// cutByte reports the bytes a long line is preferably cut after:
// whitespace, quotes and the brackets and punctuation that delimit tokens.
// Tokens (base64, base64url, hex, JWTs, a PEM body with literal \n escapes)
// contain none of them.
func cutByte(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\v', '\f', '"', '\'', '`', ',', ';', '(', ')', '[', ']', '{', '}', '<', '>', '|':
		return true
	}
	return false
}

// lastCut returns the index of the last cutByte in s[lo:hi], or -1.
func lastCut(s string, lo, hi int) int {
	for i := hi - 1; i >= max(lo, 0); i-- {
		if cutByte(s[i]) {
			return i
		}
	}
	return -1
}

// runeStart moves i back to the start of the UTF-8 sequence it is in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return i
}

// cutLine calls emit with pieces of line (no line break in it) of at most
// MaxLineBytes, each starting at most LineOverlap bytes before the
// previous one ends. A piece ends after the last cutByte in its second
// half, or else at MaxLineBytes; the next starts after a cutByte in the
// LineOverlap/2 bytes before its latest start, or else at that start. So
// every stretch of up to LineOverlap bytes, and every run without a
// cutByte shorter than MaxLineBytes/2 (a JWT, a private key written on one
// line), lies whole within one piece.
func cutLine(line string, emit func(string)) {
	s := 0
	for len(line)-s > MaxLineBytes {
		hard := s + MaxLineBytes
		e := lastCut(line, hard-MaxLineBytes/2-1, hard) + 1
		if e == 0 {
			e = runeStart(line, hard)
		}
		emit(line[s:e])
		next := e - LineOverlap
		if p := lastCut(line, next-LineOverlap/2, next); p >= 0 {
			next = p + 1
		} else {
			next = runeStart(line, next)
		}
		s = next
	}
	emit(line[s:])
}

// boundLines returns text with every line longer than MaxLineBytes replaced
// by its pieces (cutLine), one per line; text itself when no line is.
func boundLines(text string) string {
	long := false
	for rest := text; rest != ""; {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest)
		}
		if i > MaxLineBytes {
			long = true
			break
		}
		rest = rest[min(i+1, len(rest)):]
	}
	if !long {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + len(text)/4)
	for line := range strings.Lines(text) {
		body := strings.TrimSuffix(line, "\n")
		if len(body) <= MaxLineBytes {
			b.WriteString(line)
			continue
		}
		cutLine(body, func(p string) {
			b.WriteString(p)
			b.WriteByte('\n')
		})
	}
	return b.String()
}

// pieces returns what gitleaks scans for text: text with its long lines cut
// (boundLines), in fragments of whole lines of at most MaxFragmentBytes,
// consecutive fragments sharing at least FragmentOverlap bytes. The scan
// is then linear in the size of text: pieces of a long line are at least
// MaxLineBytes/2 long and advance by at least that less 3/2 LineOverlap
// (at most 1.6 times the line is scanned, about 1.1 times for prose), and
// fragments are at least 60 KiB long and advance by at least 48 KiB (at
// most 1.25 times).
func pieces(text string) []string {
	b := boundLines(text)
	if len(b) <= MaxFragmentBytes {
		return []string{b}
	}
	var out []string
	s := 0
	for len(b)-s > MaxFragmentBytes {
		// Lines are at most MaxLineBytes+1 bytes, so both searches find a
		// line break and s moves forward.
		e := s + strings.LastIndexByte(b[s:s+MaxFragmentBytes], '\n') + 1
		out = append(out, b[s:e])
		next := e - FragmentOverlap
		s = s + strings.LastIndexByte(b[s:next], '\n') + 1
	}
	return append(out, b[s:])
}
