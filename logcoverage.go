package dotlab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The kinds of item a run's log must cover (docs/protocol.md §6 "Log
// coverage"; agent-skill "Standing rises with accurate, well logged runs").
const (
	LogItemEnvironment = "environment" // the image resolved by its pinned digest
	LogItemInput       = "input"       // one input hash check (a dataset, or helper:<name>)
	LogItemCommand     = "command"     // the entrypoint started and how it ended
	LogItemOutput      = "output"      // one output file and its hash
	LogItemComparison  = "comparison"  // one target's rerun value
	LogItemOutcome     = "outcome"     // the final outcome
)

// LogItem is one item a run's log must cover: Kind is one of the LogItem*
// constants, Name the dataset or helper:<name> key (input), the file
// (output) or the target (comparison), empty for the other kinds.
type LogItem struct {
	Kind    string `json:"kind"`
	Name    string `json:"name,omitempty"`
	Covered bool   `json:"covered"`
}

// LogCoverage is the server's judgement of an uploaded logs.jsonl against
// its run (docs/protocol.md §6 "Log coverage"): every required item in
// workflow order with whether a log line covers it, the counts, and for each
// missing item (at most MaxLogMissing) the line that would have covered it.
// Complete is true when every item is covered; it is what standing rewards
// (docs/mechanism.md §6).
type LogCoverage struct {
	Complete bool      `json:"complete"`
	Required int       `json:"required"`
	Covered  int       `json:"covered"`
	Items    []LogItem `json:"items"`
	Missing  []string  `json:"missing"`
}

// MaxLogMissing bounds LogCoverage.Missing; a last entry counts the rest.
const MaxLogMissing = 50

// logFields are the fields of a log line the coverage rules read; every
// other field is ignored. A line whose fields have other JSON types covers
// nothing.
type logFields struct {
	Step string          `json:"step"`
	Data json.RawMessage `json:"data"`
}

// The data fields each step's coverage rule reads (docs/protocol.md §6
// "Log coverage").
type (
	envData struct {
		Digest string `json:"digest"`
	}
	inputData struct {
		Name   string `json:"name"`
		Helper string `json:"helper"`
		Actual string `json:"actual"`
	}
	execData struct {
		Argv     []string `json:"argv"`
		ExitCode *int64   `json:"exit_code"`
	}
	outputData struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
	}
	compareData struct {
		Name  string          `json:"name"`
		Rerun json.RawMessage `json:"rerun"` // a JSON number; a string covers nothing
	}
	outcomeData struct {
		Outcome Outcome `json:"outcome"`
	}
)

// logNeeds is what a run's log must show, derived from the manifest and the
// run body (requiredLog), and what the scan found.
type logNeeds struct {
	digest   string            // environment: the image digest ("" when not required)
	datasets map[string]string // input: dataset name → the run's hash
	helpers  map[string]string // input: helper name → the run's hash
	argv     []string          // command: the entrypoint (nil when not required)
	outputs  map[string]string // output: file → the run's hash
	reruns   map[string]Decimal
	outcome  Outcome
	order    []LogItem // the items in workflow order
	covered  map[LogItem]bool
	started  bool // an execute line with the entrypoint's argv
	exited   bool // an execute line with an integer exit_code
}

// CheckLogCoverage judges logs (the JSON-lines text of PUT /jobs/{id}/logs)
// against the run body b of manifest m (docs/protocol.md §6 "Log
// coverage"). The required items come from the manifest and the run, never
// from the log: for reproduced and not_reproduced, the environment, every
// input hash the run reports, the command, every output the run reports,
// every target's comparison and the outcome; for input_mismatch, the inputs
// and the outcome; for spec_issue, the inputs, outputs and comparisons the
// run reports and the outcome, plus the environment and the command when it
// reports outputs. One pass over the lines, each parsed once: lines that are
// not JSON objects, or whose fields have other types, cover nothing. It
// never fails.
func CheckLogCoverage(m *Manifest, b *RunBody, logs []byte) *LogCoverage {
	n := requiredLog(m, b)
	for len(logs) > 0 {
		line := logs
		if i := bytes.IndexByte(logs, '\n'); i >= 0 {
			line, logs = logs[:i], logs[i+1:]
		} else {
			logs = nil
		}
		n.scan(line)
	}
	return n.result()
}

// requiredLog lists the items a log of run b must cover.
func requiredLog(m *Manifest, b *RunBody) *logNeeds {
	n := &logNeeds{datasets: map[string]string{}, helpers: map[string]string{}, outputs: map[string]string{},
		reruns: map[string]Decimal{}, covered: map[LogItem]bool{}}
	executed := b.Outcome.Compared() || (b.Outcome == OutcomeSpecIssue && len(b.OutputHashes) > 0)
	if executed {
		n.digest = b.Environment.ImageDigest
		if n.digest == "" {
			n.digest = m.Environment.ImageDigest()
		}
		n.order = append(n.order, LogItem{Kind: LogItemEnvironment})
	}
	for _, key := range SortedKeys(b.InputHashes) {
		if name, ok := strings.CutPrefix(key, "helper:"); ok && m.hasHelperKey(key) {
			n.helpers[name] = b.InputHashes[key]
		} else {
			n.datasets[key] = b.InputHashes[key]
		}
		n.order = append(n.order, LogItem{Kind: LogItemInput, Name: key})
	}
	if executed {
		n.argv = m.Entrypoint
		n.order = append(n.order, LogItem{Kind: LogItemCommand})
	}
	if b.Outcome != OutcomeInputMismatch {
		for _, file := range SortedKeys(b.OutputHashes) {
			n.outputs[file] = b.OutputHashes[file]
			n.order = append(n.order, LogItem{Kind: LogItemOutput, Name: file})
		}
		for _, c := range b.Comparisons {
			if _, dup := n.reruns[c.Name]; dup || c.Name == "" {
				continue
			}
			n.reruns[c.Name] = c.Rerun
			n.order = append(n.order, LogItem{Kind: LogItemComparison, Name: c.Name})
		}
	}
	n.outcome = b.Outcome
	n.order = append(n.order, LogItem{Kind: LogItemOutcome})
	return n
}

// scan marks what one log line covers. Each line costs one parse and a few
// map lookups, so the whole check is linear in the log's size.
func (n *logNeeds) scan(line []byte) {
	var f logFields
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &f) != nil || len(f.Data) == 0 {
		return
	}
	switch f.Step {
	case "environment":
		var d envData
		if json.Unmarshal(f.Data, &d) == nil && n.digest != "" && d.Digest == n.digest {
			n.cover(LogItemEnvironment, "")
		}
	case "inputs":
		var d inputData
		if json.Unmarshal(f.Data, &d) != nil {
			return
		}
		if h, ok := n.datasets[d.Name]; ok && d.Name != "" && d.Actual == h {
			n.cover(LogItemInput, d.Name)
		}
		if h, ok := n.helpers[d.Helper]; ok && d.Helper != "" && d.Actual == h {
			n.cover(LogItemInput, HelperInputKey(d.Helper))
		}
	case "execute":
		var d execData
		if n.argv == nil || json.Unmarshal(f.Data, &d) != nil {
			return
		}
		n.started = n.started || slices.Equal(d.Argv, n.argv)
		n.exited = n.exited || d.ExitCode != nil
		if n.started && n.exited {
			n.cover(LogItemCommand, "")
		}
	case "outputs":
		var d outputData
		if json.Unmarshal(f.Data, &d) == nil {
			if h, ok := n.outputs[d.Path]; ok && d.SHA256 == h {
				n.cover(LogItemOutput, d.Path)
			}
		}
	case "compare":
		var d compareData
		if json.Unmarshal(f.Data, &d) == nil {
			n.compare(d.Name, d.Rerun)
		}
	case "outcome":
		var d outcomeData
		if json.Unmarshal(f.Data, &d) == nil && d.Outcome != "" && d.Outcome == n.outcome {
			n.cover(LogItemOutcome, "")
		}
	}
}

// compare covers a target when the logged rerun value is a JSON number
// equal to the run's (1.580 equals 1.58). Each target is compared until
// covered.
func (n *logNeeds) compare(name string, raw json.RawMessage) {
	want, ok := n.reruns[name]
	if !ok || len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) || n.covered[LogItem{Kind: LogItemComparison, Name: name}] {
		return
	}
	if v := string(raw); v == string(want) || sameValue(v, string(want)) {
		n.cover(LogItemComparison, name)
	}
}

// sameValue reports whether the JSON numbers a and b (valid JSON number
// text) have the same value however written (1.580, 158e-2; -0 and 0), by
// their significant digits and exponents: linear in their length, with no
// big-number arithmetic or regular expression.
func sameValue(a, b string) bool {
	na, da, ea, oka := numberParts(a)
	nb, db, eb, okb := numberParts(b)
	if !oka || !okb {
		return false
	}
	if da == "" || db == "" {
		return da == db // zero, whatever its sign
	}
	return na == nb && da == db && ea == eb
}

// numberParts splits valid JSON number text into its sign, its significant
// digits (no leading or trailing zeros; "" for zero) and exp, so that
// |value| = digits × 10^exp; ok is false for an exponent beyond ±10^9.
func numberParts(s string) (neg bool, digits string, exp int, ok bool) {
	neg = strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > 1e9 || e < -1e9 {
			return neg, "", 0, false
		}
		s, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(s, ".")
	digits = strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	n := len(digits)
	digits = strings.TrimRight(digits, "0")
	exp += n - len(digits)
	return neg, digits, exp, true
}

func (n *logNeeds) cover(kind, name string) { n.covered[LogItem{Kind: kind, Name: name}] = true }

// result lists the items in workflow order with what covered them.
func (n *logNeeds) result() *LogCoverage {
	c := &LogCoverage{Items: make([]LogItem, 0, len(n.order)), Missing: []string{}}
	missing := 0
	for _, it := range n.order {
		it.Covered = n.covered[it]
		c.Items = append(c.Items, it)
		c.Required++
		if it.Covered {
			c.Covered++
			continue
		}
		missing++
		if missing <= MaxLogMissing {
			c.Missing = append(c.Missing, n.want(it))
		}
	}
	if missing > MaxLogMissing {
		c.Missing = append(c.Missing, fmt.Sprintf("… and %d more items (see items)", missing-MaxLogMissing))
	}
	c.Complete = missing == 0
	return c
}

// want says which log line would cover an item.
func (n *logNeeds) want(it LogItem) string {
	switch it.Kind {
	case LogItemEnvironment:
		return fmt.Sprintf(`environment: an "environment" line with data.digest %q (the image resolved by its pinned digest)`, n.digest)
	case LogItemInput:
		if name, ok := strings.CutPrefix(it.Name, "helper:"); ok {
			if h, ok := n.helpers[name]; ok {
				return fmt.Sprintf(`input %s: an "inputs" line with data.helper %q and data.actual %q`, it.Name, name, h)
			}
		}
		return fmt.Sprintf(`input %s: an "inputs" line with data.name %q and data.actual %q`, it.Name, it.Name, n.datasets[it.Name])
	case LogItemCommand:
		argv, _ := json.Marshal(n.argv)
		var parts []string
		if !n.started {
			parts = append(parts, fmt.Sprintf("data.argv %s (the manifest's entrypoint)", argv))
		}
		if !n.exited {
			parts = append(parts, "data.exit_code (an integer: how the command ended)")
		}
		return `command: an "execute" line with ` + strings.Join(parts, ", and one with ")
	case LogItemOutput:
		return fmt.Sprintf(`output %s: an "outputs" line with data.path %q and data.sha256 %q`, it.Name, it.Name, n.outputs[it.Name])
	case LogItemComparison:
		return fmt.Sprintf(`comparison %s: a "compare" line with data.name %q and data.rerun %s (the run's value, as a JSON number)`, it.Name, it.Name, n.reruns[it.Name])
	}
	return fmt.Sprintf(`outcome: an "outcome" line with data.outcome %q`, n.outcome)
}
