package dotlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TargetSource says where a target's rerun value comes from when
// results.json does not give it (docs/manifest-spec.md "targets[].source"):
// exactly one place (Stream "stdout" or "stderr", or File, an absolute
// sandbox path under /work/out/ or, with scratch, /work/scratch/) and
// exactly one extractor (JSON, CSV or Regex). The runner applies it after
// the run; the number is taken exactly as its decimal text.
type TargetSource struct {
	Stream string   `json:"stream,omitempty"`
	File   string   `json:"file,omitempty"`
	JSON   string   `json:"json,omitempty"`
	CSV    *CSVCell `json:"csv,omitempty"`
	Regex  string   `json:"regex,omitempty"`
}

// CSVCell selects one cell of a CSV table whose first row is its header:
// the column named Column, in the one row whose key column (Row's only
// key) holds Row's only value. Delimiter is one character, default ",".
type CSVCell struct {
	Column    string            `json:"column"`
	Row       map[string]string `json:"row"`
	Delimiter string            `json:"delimiter,omitempty"`
}

// Key returns the key column and the value the row is selected by.
func (c CSVCell) Key() (column, value string) {
	for k, v := range c.Row {
		return k, v
	}
	return "", ""
}

// Comma is the delimiter as a rune (',' by default).
func (c CSVCell) Comma() rune {
	if c.Delimiter == "" {
		return ','
	}
	return []rune(c.Delimiter)[0]
}

// Where is the source's place as written: "stdout", "stderr" or the file path.
func (s TargetSource) Where() string {
	if s.File != "" {
		return s.File
	}
	return s.Stream
}

// Rule describes the extractor for notes: `json $.a.b`, `csv column "x" where "k" = "v"`, `regex "…"`.
func (s TargetSource) Rule() string {
	switch {
	case s.JSON != "":
		return "json " + s.JSON
	case s.CSV != nil:
		k, v := s.CSV.Key()
		return fmt.Sprintf("csv column %q where %q = %q", s.CSV.Column, k, v)
	}
	return "regex " + strconv.Quote(s.Regex)
}

// Sandbox paths a file source may name (docs/manifest-spec.md).
const (
	SourceOutDir     = "/work/out/"
	SourceScratchDir = "/work/scratch/"
)

// MaxJSONPath bounds a source's JSON path, in bytes.
const MaxJSONPath = 1024

// PathStep is one step of a JSON path: an object key, or (Index >= 0) an array index.
type PathStep struct {
	Key   string
	Index int
}

// ParseJSONPath parses the JSON path subset of target sources: "$"
// followed by steps, each ".key" (key of letters, digits, '_' and '-'),
// `["key"]` (any key, as a JSON string) or "[N]" (an array index, no
// leading zeros). "$" alone selects the whole document.
func ParseJSONPath(p string) ([]PathStep, error) {
	if len(p) > MaxJSONPath {
		return nil, fmt.Errorf("is %d bytes; at most %d", len(p), MaxJSONPath)
	}
	if !strings.HasPrefix(p, "$") {
		return nil, errors.New(`must start with "$" (e.g. $.coef.did or $.rows[0]["(Intercept)"])`)
	}
	var steps []PathStep
	rest := p[1:]
	for rest != "" {
		var st PathStep
		var err error
		switch rest[0] {
		case '.':
			st, rest, err = dotStep(rest[1:])
		case '[':
			st, rest, err = bracketStep(rest[1:])
		default:
			err = fmt.Errorf("unexpected %q at byte %d: steps are .key, [\"key\"] or [N]", rest[0], len(p)-len(rest))
		}
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func dotStep(s string) (PathStep, string, error) {
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] == '-' || s[n] >= '0' && s[n] <= '9' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z') {
		n++
	}
	if n == 0 {
		return PathStep{}, "", errors.New(`empty key after ".": write other keys as ["key"]`)
	}
	return PathStep{Key: s[:n], Index: -1}, s[n:], nil
}

func bracketStep(s string) (PathStep, string, error) {
	end := strings.IndexByte(s, ']')
	if strings.HasPrefix(s, `"`) {
		// A JSON string: find its closing quote, then "]".
		dec := json.NewDecoder(strings.NewReader(s))
		var key string
		if err := dec.Decode(&key); err != nil {
			return PathStep{}, "", fmt.Errorf(`["key"]: %v`, err)
		}
		rest := s[dec.InputOffset():]
		if !strings.HasPrefix(rest, "]") {
			return PathStep{}, "", errors.New(`["key"] must end with "]"`)
		}
		return PathStep{Key: key, Index: -1}, rest[1:], nil
	}
	if end <= 0 {
		return PathStep{}, "", errors.New(`"[" must hold an index [N] or a quoted key ["key"], then "]"`)
	}
	num := s[:end]
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || num != strconv.Itoa(i) {
		return PathStep{}, "", fmt.Errorf("[%s]: an index is a non-negative integer without leading zeros", num)
	}
	return PathStep{Index: i}, s[end+1:], nil
}
