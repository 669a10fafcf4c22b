package runner

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/safefs"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/dotlab/dotlab/strictjson"
)

// MaxSourceBytes bounds what a target source reads (docs/manifest-spec.md
// "targets[].source"): a file, or a captured stream, 16 MiB.
const MaxSourceBytes = 16 << 20

// outputs is what target sources read after the run: the host copy of
// /work/out, the captured streams (only those a source reads) and the
// scratch files the sandbox kept.
type outputs struct {
	outDir  string
	streams map[string]*capBuffer
	kept    map[string]sandbox.KeptFile
}

// sourceValues extracts the value of every target that has a source and no
// value in have (results.json wins when it has the key). Every target whose
// source does not give a number is reported, naming the target and the rule.
func (o *outputs) sourceValues(log *Log, targets []dotlab.Target, have map[string]dotlab.Decimal, readFrom map[string]string) error {
	var probs []string
	for _, t := range targets {
		if t.Source == nil {
			continue
		}
		if _, ok := have[t.Name]; ok {
			log.Info("results", "target "+t.Name+" from results.json (it wins over the source)", map[string]any{"name": t.Name})
			continue
		}
		s := *t.Source
		v, problem := o.extract(s)
		if problem != "" {
			probs = append(probs, fmt.Sprintf("target %s: source %s, %s: %s", t.Name, s.Where(), s.Rule(), problem))
			continue
		}
		log.Info("results", "target "+t.Name+" read from "+s.Where(), map[string]any{"name": t.Name, "source": s.Where(), "rule": s.Rule(), "value": v})
		have[t.Name] = v
		readFrom[t.Name] = s.Where() + ", " + s.Rule()
	}
	if len(probs) > 0 {
		return issuef("%s", strings.Join(probs, "; "))
	}
	return nil
}

// extract reads the source's bytes and applies its extractor; the number
// must be a valid decimal as written (dotlab.Decimal.Validate: JSON number
// syntax, so "+2.7", "2,7", "NA" and ".5" are refused).
func (o *outputs) extract(s dotlab.TargetSource) (dotlab.Decimal, string) {
	data, problem := o.read(s)
	if problem != "" {
		return "", problem
	}
	var text string
	switch {
	case s.JSON != "":
		text, problem = extractJSON(s.JSON, data)
	case s.CSV != nil:
		text, problem = extractCSV(*s.CSV, data)
	default:
		text, problem = extractRegex(s.Regex, data)
	}
	if problem != "" {
		return "", problem
	}
	d := dotlab.Decimal(text)
	if err := d.Validate(); err != nil {
		return "", fmt.Sprintf("not a number (%v)", err)
	}
	return d, ""
}

// read returns the bytes of the source's stream or file.
func (o *outputs) read(s dotlab.TargetSource) ([]byte, string) {
	if s.Stream != "" {
		b := o.streams[s.Stream]
		if b == nil {
			return nil, "the stream was not captured"
		}
		if b.over {
			return nil, fmt.Sprintf("%s is longer than %d bytes, the bound of what a source reads", s.Stream, MaxSourceBytes)
		}
		return b.data, ""
	}
	if rel, ok := strings.CutPrefix(s.File, dotlab.SourceScratchDir); ok {
		k, ok := o.kept[rel]
		if !ok {
			return nil, "the scratch copy was not kept (does the manifest set \"scratch\": true?)"
		}
		return k.Data, k.Problem
	}
	rel := strings.TrimPrefix(s.File, dotlab.SourceOutDir)
	root, err := os.OpenRoot(o.outDir)
	if err != nil {
		return nil, "the output directory cannot be opened: " + err.Error()
	}
	defer root.Close()
	data, err := safefs.ReadNoFollow(root, rel, MaxSourceBytes)
	if err != nil {
		return nil, err.Error()
	}
	return data, ""
}

// extractJSON parses data strictly (strictjson) and follows the path to a
// JSON number, returned as its text.
func extractJSON(path string, data []byte) (string, string) {
	steps, err := dotlab.ParseJSONPath(path)
	if err != nil {
		return "", "bad path: " + err.Error()
	}
	node, err := strictjson.ParseLimits(data, strictjson.Limits{MaxBytes: MaxSourceBytes, MaxDepth: 64})
	if err != nil {
		return "", "not valid JSON: " + err.Error()
	}
	at := "$"
	for _, st := range steps {
		switch n := node.(type) {
		case map[string]any:
			if st.Index >= 0 {
				return "", fmt.Sprintf("%s is an object, not an array: [%d] selects an array item (a key is written [%q])", at, st.Index, fmt.Sprint(st.Index))
			}
			v, ok := n[st.Key]
			if !ok {
				return "", fmt.Sprintf("%s has no key %q", at, st.Key)
			}
			node, at = v, fmt.Sprintf("%s[%q]", at, st.Key)
		case []any:
			switch {
			case st.Index < 0:
				return "", fmt.Sprintf("%s is an array of %d items, not an object: [%q] selects a key (an item is written [N])", at, len(n), st.Key)
			case st.Index >= len(n):
				return "", fmt.Sprintf("%s is an array of %d items: no item [%d]", at, len(n), st.Index)
			}
			node, at = n[st.Index], fmt.Sprintf("%s[%d]", at, st.Index)
		default:
			return "", fmt.Sprintf("%s is %s, not an object or array", at, jsonKind(node))
		}
	}
	num, ok := node.(json.Number)
	if !ok {
		return "", fmt.Sprintf("%s is %s, not a number", at, jsonKind(node))
	}
	return num.String(), ""
}

// extractCSV finds the one row whose key column holds the key value and
// returns its cell in the column, spaces around it trimmed. The first row
// is the header (a UTF-8 byte order mark before it is ignored).
func extractCSV(c dotlab.CSVCell, data []byte) (string, string) {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff"))))
	r.Comma = c.Comma()
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return "", "no header row: " + err.Error()
	}
	keyCol, keyVal := c.Key()
	col, problem := csvColumn(header, c.Column)
	if problem != "" {
		return "", problem
	}
	key, problem := csvColumn(header, keyCol)
	if problem != "" {
		return "", problem
	}
	found, cell := 0, ""
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", "not valid CSV: " + err.Error()
		}
		if key >= len(rec) || strings.TrimSpace(rec[key]) != keyVal {
			continue
		}
		found++
		if col >= len(rec) {
			return "", fmt.Sprintf("row %d has no column %q", line, c.Column)
		}
		cell = strings.TrimSpace(rec[col])
	}
	switch {
	case found == 0:
		return "", fmt.Sprintf("no row where %q = %q", keyCol, keyVal)
	case found > 1:
		return "", fmt.Sprintf("%d rows where %q = %q: the row must be unique", found, keyCol, keyVal)
	}
	return cell, ""
}

// csvColumn is the index of the header cell name (spaces trimmed); it must appear once.
func csvColumn(header []string, name string) (int, string) {
	at := -1
	for i, h := range header {
		if strings.TrimSpace(h) != name {
			continue
		}
		if at >= 0 {
			return 0, fmt.Sprintf("the header names column %q twice", name)
		}
		at = i
	}
	if at < 0 {
		return 0, fmt.Sprintf("the header has no column %q", name)
	}
	return at, ""
}

// extractRegex returns group 1 of the first match (RE2: linear in the
// input, which is at most MaxSourceBytes), spaces around it trimmed.
func extractRegex(expr string, data []byte) (string, string) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", "bad regular expression: " + err.Error()
	}
	if re.NumSubexp() < 1 {
		return "", "the regular expression has no group"
	}
	m := re.FindSubmatchIndex(data)
	switch {
	case m == nil:
		return "", "no match"
	case m[2] < 0:
		return "", "group 1 took no part in the match"
	}
	return strings.TrimSpace(string(data[m[2]:m[3]])), ""
}
