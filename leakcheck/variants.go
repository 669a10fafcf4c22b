package leakcheck

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// Bounds on the variants one check builds (see Checker.variants).
const (
	// MaxDecodeDepth is how many layers of encoding are peeled: base64 of
	// percent-encoding of a token is two layers.
	MaxDecodeDepth = 3
	// MaxVariants is the most texts besides the original that one check
	// scans: per layer (the original and each decoded layer) its folded
	// form and its joined form, and each decoded layer itself.
	MaxVariants = 3*(MaxDecodeDepth+1) - 1
	// VariantBytesPerInputByte and VariantBytesBase bound the total size of
	// all variants of a text of n bytes to VariantBytesPerInputByte*n +
	// VariantBytesBase. A text whose variants would be larger (NFKC
	// expansion, many encoded layers) is refused, not partly checked.
	VariantBytesPerInputByte = 3
	VariantBytesBase         = 64 << 10
	// minEncodedRun is the shortest base64 or hex run that is decoded.
	minEncodedRun = 16
)

// errVariantBudget is returned when a text's variants exceed their bound.
type errVariantBudget struct{ limit int }

func (e errVariantBudget) Error() string {
	return fmt.Sprintf("its normalised and decoded forms are over the limit of %d bytes (%d per input byte + %d)",
		e.limit, VariantBytesPerInputByte, VariantBytesBase)
}

// foldTable maps non-ASCII runes that look like one printable ASCII
// character to that character. It is derived from Unicode's confusables
// table (UTS #39 skeletons, github.com/mtibben/confusables, Unicode 13.0
// data) by inverting skeletons onto ASCII: a rune whose skeleton equals
// the skeleton of ASCII characters maps to the one of them of the same
// kind (upper-case letter, lower-case letter, digit, other), so Cyrillic
// "І" folds to "I" and Cyrillic "і" to "i", although both skeletons are
// "l". Skeletons themselves are not used: they rewrite ASCII too ("m" to
// "rn", "0" to "O"), which would break the tokens we look for.
//
// A foldTable also holds the compiled patterns the variants use, so that
// the package keeps no variables.
type foldTable struct {
	runes map[rune]byte
	// hexID matches the ordinary identifiers the allowlist passes: SHA-256
	// digests and git commit ids. They are complete by themselves.
	hexID *regexp.Regexp
	// encoded matches runs that decodeRun may decode.
	encoded *regexp.Regexp
	// quotedOperator matches a concatenation operator between two quoted
	// literals ("a" . "b", 'a' || 'b'), as a separator in join.
	quotedOperator *regexp.Regexp
}

// newFoldTable builds the table for runes U+0080..U+1FFFF (about 40 ms).
func newFoldTable() foldTable {
	bySkeleton := map[string][]byte{}
	for c := byte(0x21); c < 0x7f; c++ {
		sk := confusables.Skeleton(string(rune(c)))
		bySkeleton[sk] = append(bySkeleton[sk], c)
	}
	t := foldTable{runes: map[rune]byte{},
		hexID: regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`),
		encoded: regexp.MustCompile(
			`(?:%[0-9A-Fa-f]{2})+` +
				`|(?:\\{1,2}(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}))+` +
				`|(?:&#?[A-Za-z0-9]{1,10};)+` +
				`|[A-Za-z0-9+/_-]{16,}={0,2}`),
		quotedOperator: regexp.MustCompile(`^["'\x60]\s*(?:\.\.?|\|\||&)\s*["'\x60]$`)}
	for r := rune(0x80); r <= 0x1ffff; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		cands, ok := bySkeleton[confusables.Skeleton(string(r))]
		if !ok {
			continue
		}
		t.runes[r] = pickSameKind(r, cands)
	}
	return t
}

func kind(r rune) int {
	switch {
	case unicode.IsUpper(r):
		return 0
	case unicode.IsLower(r):
		return 1
	case unicode.IsDigit(r):
		return 2
	}
	return 3
}

func pickSameKind(r rune, cands []byte) byte {
	k := kind(r)
	for _, c := range cands {
		if kind(rune(c)) == k {
			return c
		}
	}
	for _, c := range cands {
		if unicode.IsLetter(rune(c)) {
			return c
		}
	}
	return cands[0]
}

// invisible reports characters that render as nothing or are meant to be
// skipped: format characters (category Cf: soft hyphen U+00AD, zero-width
// space, non-joiner and joiner U+200B..U+200D, word joiner U+2060, BOM
// U+FEFF, bidi controls, tag characters), the rest of Unicode's default
// ignorable code points (Hangul fillers, U+034F) and variation selectors.
func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

// fold returns text as a detector should see it: NFKC (fullwidth and
// mathematical letters become ASCII, NBSP and other spaces become " "),
// invisible characters removed, combining marks removed, look-alike
// letters from other scripts folded to ASCII, and Markdown backslash
// escapes undone (a "\" before ASCII punctuation is removed: "ghp\_" is
// "ghp_" as rendered; "\\" is one "\"). The result is only scanned,
// never shown or stored.
func (t foldTable) fold(text string) string {
	s := norm.NFD.String(norm.NFKC.String(text))
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\\' && i+1 < len(s) && asciiPunct(s[i+1]):
			b.WriteByte(s[i+1])
			i += 2
			continue
		case r < utf8.RuneSelf:
			b.WriteByte(byte(r))
		case invisible(r) || unicode.Is(unicode.Mn, r):
		default:
			if c, ok := t.runes[r]; ok {
				b.WriteByte(c)
			} else {
				b.WriteRune(r)
			}
		}
		i += size
	}
	return b.String()
}

// asciiPunct reports the characters CommonMark lets a backslash escape.
func asciiPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// Joining: a token cut into pieces ("ghp_" + "abc…", "ghp_abc" "def…", a
// token broken across lines or by spaces) is put back together.

func fragmentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func quoteByte(c byte) bool { return c == '"' || c == '\'' || c == '`' }

func spaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// plainWord: letters only, lower case after the first, under 20 letters.
// Such a fragment is read as a word of prose, not as a piece of a token.
func plainWord(f string) bool {
	if len(f) >= 20 {
		return false
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if !(c >= 'a' && c <= 'z' || i == 0 && c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (t foldTable) tokenLike(f string) bool { return !plainWord(f) && !t.hexID.MatchString(f) }

// joinSeparator decides whether the text sep between fragments a and b is
// removed. sep consists of whitespace, quotes, "+", "\", the operators
// ".", "|", "&", the Markdown emphasis markers "*" and "~", and HTML tags
// and comments (see sepLen). Explicit concatenation is always removed: a
// "+" that is not bare (" + ", "+\n"), a "\" line continuation, a
// separator that starts and ends with a quote ("a" "b", 'a'"b", a"b"), and
// between quoted literals the operators of other languages: "." (PHP,
// Perl), ".." (Lua), "||" (SQL) and "&" (Visual Basic), as in "a" . "b" or
// 'a' || 'b'. Emphasis markers and HTML tags alone (ghp_**abc**, ghp_<b></b>)
// are removed when a or b is token-like. Any other separator (whitespace,
// a quote then a space) only between two token-like fragments, so prose,
// quoted words, Markdown **bold** words, a || b and lists of digests are
// left apart.
func (t foldTable) joinSeparator(a, sep, b string) bool {
	switch {
	case strings.ContainsAny(sep, ".|&"):
		return t.quotedOperator.MatchString(sep)
	case strings.ContainsAny(sep, "*~<"):
		return markup(sep) && (t.tokenLike(a) || t.tokenLike(b))
	}
	if sep == "+" {
		return false // a+b, base64: not a concatenation
	}
	if strings.Contains(sep, "+") || strings.Contains(sep, "\\\n") || strings.Contains(sep, "\\\r\n") {
		return true
	}
	if quoteByte(sep[0]) && quoteByte(sep[len(sep)-1]) {
		return true
	}
	return t.tokenLike(a) && t.tokenLike(b)
}

// maxTag bounds the length of an HTML tag or comment that sepLen skips.
const maxTag = 64

// tagLen returns the length of the HTML tag (<b>, </span>, <br/>,
// <span class="x">) or comment (<!-- -->) s starts with, or 0. It reads at
// most maxTag bytes and never past a second "<".
func tagLen(s string) int {
	s = s[:min(len(s), maxTag)]
	if strings.HasPrefix(s, "<!--") {
		if e := strings.Index(s[4:], "-->"); e >= 0 {
			return 4 + e + 3
		}
		return 0
	}
	i := 1
	if i < len(s) && s[i] == '/' {
		i++
	}
	if i >= len(s) || !(s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		return 0
	}
	for i < len(s) && (fragmentByte(s[i]) && s[i] != '_') {
		i++
	}
	if i < len(s) && !(s[i] == '>' || s[i] == '/' || spaceByte(s[i])) {
		return 0
	}
	for ; i < len(s); i++ {
		switch s[i] {
		case '>':
			return i + 1
		case '<':
			return 0
		}
	}
	return 0
}

// markup reports whether sep is only emphasis markers and HTML tags.
func markup(sep string) bool {
	for i := 0; i < len(sep); {
		switch {
		case sep[i] == '*' || sep[i] == '~':
			i++
		case sep[i] == '<':
			n := tagLen(sep[i:])
			if n == 0 {
				return false
			}
			i += n
		default:
			return false
		}
	}
	return true
}

// sepLen returns the length of the separator text starts with: whitespace,
// quotes, "+", "\", ".", "|", "&", "*", "~" and HTML tags.
func sepLen(text string) int {
	k := 0
	for k < len(text) {
		c := text[k]
		switch {
		case spaceByte(c) || quoteByte(c) || strings.IndexByte("+\\.|&*~", c) >= 0:
			k++
		case c == '<':
			n := tagLen(text[k:])
			if n == 0 {
				return k
			}
			k += n
		default:
			return k
		}
	}
	return k
}

// join returns text with the separators between token pieces removed.
func (t foldTable) join(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	i, n := 0, len(text)
	for i < n {
		if !fragmentByte(text[i]) {
			b.WriteByte(text[i])
			i++
			continue
		}
		j := i
		for j < n && fragmentByte(text[j]) {
			j++
		}
		frag := text[i:j]
		b.WriteString(frag)
		i = j
		// Look at the separator that follows and the fragment after it.
		k := i + sepLen(text[i:])
		if k > i && k < n && fragmentByte(text[k]) {
			m := k
			for m < n && fragmentByte(text[m]) {
				m++
			}
			if t.joinSeparator(frag, text[i:k], text[k:m]) {
				i = k // drop the separator; the next fragment follows directly
			}
		}
	}
	return b.String()
}

// Decoding: base64 (standard and URL alphabets, padded or not), hex,
// percent-encoding, \u / \x escapes and HTML character references. A run
// is replaced by its decoding only when that is printable text (valid
// UTF-8, no control characters but tab and line breaks); other runs are
// left as they are.

func printableText(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r == '\t' || r == '\n' || r == '\r' {
			continue
		}
		if !unicode.IsGraphic(r) && !invisible(r) {
			return false
		}
	}
	return true
}

func decodeRun(run string) (string, bool) {
	switch {
	case run[0] == '%':
		out := make([]byte, 0, len(run)/3)
		for i := 0; i+2 < len(run); i += 3 {
			v, _ := strconv.ParseUint(run[i+1:i+3], 16, 8)
			out = append(out, byte(v))
		}
		return string(out), printableText(out)
	case run[0] == '\\':
		return decodeEscapes(run)
	case run[0] == '&':
		s := html.UnescapeString(run)
		return s, s != run && printableText([]byte(s))
	}
	if len(run)%2 == 0 && len(run) >= 32 {
		if out, err := hex.DecodeString(run); err == nil && printableText(out) {
			return string(out), true
		}
	}
	body := strings.TrimRight(run, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if out, err := enc.DecodeString(body); err == nil && printableText(out) {
			return string(out), true
		}
	}
	return "", false
}

func decodeEscapes(run string) (string, bool) {
	var units []uint16
	var out []byte
	flush := func() {
		if len(units) > 0 {
			out = append(out, string(utf16.Decode(units))...)
			units = units[:0]
		}
	}
	i := 0
	for i < len(run) {
		for i < len(run) && run[i] == '\\' {
			i++
		}
		if i >= len(run) {
			break
		}
		switch run[i] {
		case 'u':
			v, _ := strconv.ParseUint(run[i+1:i+5], 16, 16)
			units = append(units, uint16(v))
			i += 5
		case 'U':
			flush()
			v, _ := strconv.ParseUint(run[i+1:i+9], 16, 32)
			out = utf8.AppendRune(out, rune(v))
			i += 9
		case 'x':
			flush()
			v, _ := strconv.ParseUint(run[i+1:i+3], 16, 8)
			out = append(out, byte(v))
			i += 3
		default:
			return "", false
		}
	}
	flush()
	return string(out), printableText(out)
}

// decodeLines appends to out, for each line of text that holds at least
// one run that decodes to printable text (with onlyFresh, at least one such
// run not in runs), that line with every such run replaced by its
// decoding, unless seen already has the result. Decoded runs are added to
// runs and results to seen. It reports how many lines were added.
func (t foldTable) decodeLines(text string, onlyFresh bool, runs, seen map[string]bool, out *strings.Builder) int {
	count := 0
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		fresh := false
		changed := false
		dec := t.encoded.ReplaceAllStringFunc(line, func(run string) string {
			s, ok := decodeRun(run)
			if !ok {
				return run
			}
			changed = true
			if !runs[run] {
				runs[run] = true
				fresh = true
			}
			return s
		})
		if !changed || onlyFresh && !fresh || seen[dec] {
			continue
		}
		seen[dec] = true
		count++
		out.WriteString(dec)
		out.WriteByte('\n')
	}
	return count
}

// variants returns the texts the detector scans besides text itself:
// text folded (see fold) and joined (see join), then, layer by layer up
// to MaxDecodeDepth, the lines in which encoded runs decode to text, each
// layer again folded and joined. Identical texts are scanned once. An
// errVariantBudget is returned when the variants' total size would pass
// VariantBytesPerInputByte*len(text)+VariantBytesBase.
func (t foldTable) variants(text string) ([]string, error) {
	limit := VariantBytesPerInputByte*len(text) + VariantBytesBase
	total := 0
	seen := map[string]bool{text: true}
	var out []string
	add := func(s string) (bool, error) {
		if seen[s] {
			return false, nil
		}
		total += len(s)
		if total > limit || len(out) >= MaxVariants {
			return false, errVariantBudget{limit}
		}
		seen[s] = true
		out = append(out, s)
		return true, nil
	}
	layer := text
	for depth := 0; ; depth++ {
		folded := t.fold(layer)
		joined := t.join(folded)
		for _, v := range []string{folded, joined} {
			if _, err := add(v); err != nil {
				return nil, err
			}
		}
		if depth == MaxDecodeDepth {
			return out, nil
		}
		// Lines of the joined text are decoded only for runs the folded
		// text did not have (a base64 run that was broken across lines).
		var next strings.Builder
		runs, lines := map[string]bool{}, map[string]bool{}
		n := t.decodeLines(folded, false, runs, lines, &next)
		if joined != folded {
			n += t.decodeLines(joined, true, runs, lines, &next)
		}
		if n == 0 {
			return out, nil
		}
		layer = next.String()
		if ok, err := add(layer); err != nil {
			return nil, err
		} else if !ok {
			return out, nil
		}
	}
}
