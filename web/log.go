package web

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The run page shows a run's JSON-lines log (docs/protocol.md §6 "Logs") as
// a timeline: filtered by level, step and text, a page at a time, each long
// field clipped. The raw log has every line, byte for byte.

// logLine is one line of a run's JSON-lines log, or a line that is not a
// JSON object, shown raw.
type logLine struct {
	N     int
	T     string
	Level string
	Step  string
	Msg   string
	Data  string
}

// logPage is how many lines the timeline shows at once; the raw log has
// every line.
const logPage = 500

// logPageBytes bounds the text of one timeline page, and logField one
// message or data field on it (a single log line may be 8 MiB).
const (
	logPageBytes = 256 << 10
	logField     = 4 << 10
)

// clip cuts s to logField bytes (on a rune boundary) and says how much is left
// out.
func clip(s string) string {
	if len(s) <= logField {
		return s
	}
	cut := logField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " … (" + strconv.Itoa(len(s)) + " bytes in all; see the raw log)"
}

// Known log levels and steps (the ones the reference runner writes; see
// docs/protocol.md §6 "Logs"), offered as suggestions by the filter form.
// Other runners may log other steps.
var (
	logLevels = []string{"info", "warn", "error"}
	logSteps  = []string{"run", "inputs", "environment", "code", "execute", "outputs", "results", "compare", "outcome"}
)

// logFilter selects log lines: exact level and step, and text contained
// (case-insensitive) in the message or data.
type logFilter struct {
	Level, Step, Text string
}

// parseLog reads a JSON-lines log from line number from (1-based) and
// returns at most logPage lines passing the filter, and the line number to
// continue from (0 at the end). Lines are tested on their raw bytes before
// they are decoded, so a filtered read of an 8 MiB log decodes only what
// can match.
func parseLog(b []byte, f logFilter, from int) (lines []logLine, next int) {
	pre := newPrefilter(f)
	n, shown := 0, 0
	for len(b) > 0 {
		raw := b
		if k := bytes.IndexByte(b, '\n'); k >= 0 {
			raw, b = b[:k], b[k+1:]
		} else {
			b = nil
		}
		n++
		if n < from || len(bytes.TrimSpace(raw)) == 0 || !pre.mayMatch(raw) {
			continue
		}
		if len(lines) == logPage || shown > logPageBytes {
			return lines, n
		}
		l := decodeLogLine(n, raw)
		if !f.matches(l) {
			continue
		}
		l.Msg, l.Data = clip(l.Msg), clip(l.Data)
		shown += len(l.T) + len(l.Level) + len(l.Step) + len(l.Msg) + len(l.Data)
		lines = append(lines, l)
	}
	return lines, 0
}

// decodeLogLine decodes line n; a line that is not a JSON object is kept
// raw, with level "raw".
func decodeLogLine(n int, raw []byte) logLine {
	var e struct {
		T     string          `json:"t"`
		Level string          `json:"level"`
		Step  string          `json:"step"`
		Msg   string          `json:"msg"`
		Data  json.RawMessage `json:"data"`
	}
	l := logLine{N: n}
	if err := json.Unmarshal(raw, &e); err != nil {
		l.Level, l.Msg = "raw", string(raw)
		return l
	}
	l.T, l.Level, l.Step, l.Msg = e.T, e.Level, e.Step, e.Msg
	if len(e.Data) > 0 && string(e.Data) != "{}" && string(e.Data) != "null" {
		l.Data = string(e.Data)
	}
	return l
}

// matches reports whether a decoded line passes the filter.
func (f logFilter) matches(l logLine) bool {
	text := strings.ToLower(f.Text)
	return (f.Level == "" || l.Level == f.Level) && (f.Step == "" || l.Step == f.Step) &&
		(text == "" || strings.Contains(strings.ToLower(l.Msg+" "+l.Data), text))
}

// prefilter tests raw lines before they are decoded. It may only drop lines
// that cannot match. A line without a backslash has no JSON escapes, so its
// strings appear in it verbatim: a quoted value is there whatever the
// spacing, and the text is there as written. Lines with escapes are always
// decoded.
type prefilter struct {
	f           logFilter
	text        []byte
	level, step []byte // nil: not verbatim in any line, decode to compare
}

func newPrefilter(f logFilter) prefilter {
	quoted := func(v string) []byte {
		if strings.ContainsAny(v, "\"\\") {
			return nil
		}
		return []byte(`"` + v + `"`)
	}
	return prefilter{f: f, text: []byte(strings.ToLower(f.Text)), level: quoted(f.Level), step: quoted(f.Step)}
}

func (p prefilter) mayMatch(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') >= 0 {
		return true
	}
	return !((len(p.text) > 0 && !bytes.Contains(bytes.ToLower(raw), p.text)) ||
		(p.f.Level != "" && p.f.Level != "raw" && p.level != nil && !bytes.Contains(raw, p.level)) ||
		(p.f.Step != "" && p.step != nil && !bytes.Contains(raw, p.step)))
}
