package dotlab_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

const (
	covData   = "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"
	covHelper = "1111111111111111111111111111111111111111111111111111111111111111"
	covOut    = "2222222222222222222222222222222222222222222222222222222222222222"
	covImage  = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

func coverageFixture() (*dotlab.Manifest, *dotlab.RunBody) {
	m := &dotlab.Manifest{
		Datasets:    []dotlab.Dataset{{Name: "sleep", SHA256: covData}},
		Helpers:     []dotlab.Helper{{Name: "sleep", SHA256: covHelper}}, // same name as the dataset
		Environment: dotlab.Environment{Image: "registry.example.org/python@" + covImage},
		Entrypoint:  []string{"python3", "analysis.py"},
		Targets:     []dotlab.Target{{Name: "mean_diff"}, {Name: "sd_diff"}},
	}
	b := &dotlab.RunBody{
		InputHashes:  map[string]string{"sleep": covData, "helper:sleep": covHelper},
		OutputHashes: map[string]string{"results.json": covOut},
		Environment:  dotlab.RunEnvironment{ImageDigest: covImage},
		Comparisons:  []dotlab.RunComparison{{Name: "mean_diff", Rerun: "1.58"}, {Name: "sd_diff", Rerun: "1.17"}},
		Outcome:      dotlab.OutcomeReproduced,
	}
	return m, b
}

// covLines are one covering line per item of coverageFixture, keyed by item.
var covLines = map[string]string{
	"environment":          `{"t":"x","level":"info","step":"environment","msg":"m","data":{"digest":"` + covImage + `"}}`,
	"input:sleep":          `{"t":"x","level":"info","step":"inputs","msg":"m","data":{"name":"sleep","actual":"` + covData + `"}}`,
	"input:helper:sleep":   `{"t":"x","level":"info","step":"inputs","msg":"m","data":{"helper":"sleep","actual":"` + covHelper + `"}}`,
	"command":              `{"t":"x","level":"info","step":"execute","msg":"m","data":{"argv":["python3","analysis.py"]}}` + "\n" + `{"t":"x","level":"info","step":"execute","msg":"m","data":{"exit_code":0}}`,
	"output:results.json":  `{"t":"x","level":"info","step":"outputs","msg":"m","data":{"path":"results.json","sha256":"` + covOut + `"}}`,
	"comparison:mean_diff": `{"t":"x","level":"info","step":"compare","msg":"m","data":{"name":"mean_diff","rerun":1.580}}`,
	"comparison:sd_diff":   `{"t":"x","level":"info","step":"compare","msg":"m","data":{"name":"sd_diff","rerun":117e-2}}`,
	"outcome":              `{"t":"x","level":"info","step":"outcome","msg":"m","data":{"outcome":"reproduced","notes":""}}`,
}

var covOrder = []string{"environment", "input:helper:sleep", "input:sleep", "command", "output:results.json", "comparison:mean_diff", "comparison:sd_diff", "outcome"}

func covLog(without ...string) []byte {
	var b bytes.Buffer
	skip := strings.Join(without, " ")
	for _, k := range covOrder {
		if !strings.Contains(" "+skip+" ", " "+k+" ") {
			b.WriteString(covLines[k] + "\n")
		}
	}
	return b.Bytes()
}

func itemKeys(c *dotlab.LogCoverage, covered bool) []string {
	var out []string
	for _, it := range c.Items {
		if it.Covered == covered {
			k := it.Kind
			if it.Name != "" {
				k += ":" + it.Name
			}
			out = append(out, k)
		}
	}
	return out
}

// TestLogCoverageRules: each item of docs/protocol.md §6 "Log coverage" is
// covered by its line and by nothing else; numbers compare by value; a
// helper and a dataset of the same name are told apart.
func TestLogCoverageRules(t *testing.T) {
	m, b := coverageFixture()
	c := dotlab.CheckLogCoverage(m, b, covLog())
	if !c.Complete || c.Required != 8 || c.Covered != 8 || len(c.Missing) != 0 || strings.Join(itemKeys(c, true), " ") != strings.Join(covOrder, " ") {
		t.Fatalf("complete log: %+v", c)
	}
	for _, k := range covOrder {
		c := dotlab.CheckLogCoverage(m, b, covLog(k))
		if c.Complete || c.Covered != 7 || strings.Join(itemKeys(c, false), " ") != k || len(c.Missing) != 1 {
			t.Errorf("without %s: %+v", k, c)
		}
	}
	// Lines that almost cover an item cover nothing.
	near := map[string]string{
		"environment":          strings.Replace(covLines["environment"], "3333", "4444", 1),
		"input:sleep":          strings.Replace(covLines["input:sleep"], `"name"`, `"helper"`, 1), // the helper's line with the dataset's hash
		"command":              strings.Replace(covLines["command"], `"exit_code":0`, `"exit_code":"0"`, 1),
		"output:results.json":  strings.Replace(covLines["output:results.json"], `"results.json"`, `"out/results.json"`, 1),
		"comparison:mean_diff": strings.Replace(covLines["comparison:mean_diff"], `1.580`, `"1.58"`, 1),
		"comparison:sd_diff":   strings.Replace(covLines["comparison:sd_diff"], `117e-2`, `1.1700001`, 1),
		"outcome":              strings.Replace(covLines["outcome"], `"reproduced"`, `"not_reproduced"`, 1),
	}
	for k, line := range near {
		log := append(covLog(k), line+"\n"...)
		if c := dotlab.CheckLogCoverage(m, b, log); c.Complete || strings.Join(itemKeys(c, false), " ") != k {
			t.Errorf("%s covered by %s: %+v", k, line, c)
		}
	}
	// The command needs the manifest's argv exactly.
	log := covLog("command")
	log = append(log, strings.Replace(covLines["command"], `"analysis.py"`, `"analysis.py","--fast"`, 1)+"\n"...)
	if c := dotlab.CheckLogCoverage(m, b, log); c.Complete || !strings.Contains(c.Missing[0], `data.argv ["python3","analysis.py"]`) {
		t.Errorf("other argv: %+v", c)
	}
}

// TestLogCoverageByOutcome: what is required follows the run's outcome.
func TestLogCoverageByOutcome(t *testing.T) {
	m, b := coverageFixture()
	b.Outcome, b.Comparisons, b.OutputHashes = dotlab.OutcomeInputMismatch, nil, nil
	b.InputHashes = map[string]string{"sleep": strings.Repeat("9", 64)}
	log := strings.Replace(covLines["input:sleep"], covData, strings.Repeat("9", 64), 1) + "\n" +
		strings.Replace(covLines["outcome"], "reproduced", "input_mismatch", 1) + "\n"
	if c := dotlab.CheckLogCoverage(m, b, []byte(log)); !c.Complete || strings.Join(itemKeys(c, true), " ") != "input:sleep outcome" {
		t.Errorf("input_mismatch: %+v", c)
	}
	// spec_issue before anything ran: the inputs it reports and the outcome.
	m, b = coverageFixture()
	b.Outcome, b.Comparisons, b.OutputHashes, b.Notes = dotlab.OutcomeSpecIssue, nil, nil, "code cannot be fetched"
	c := dotlab.CheckLogCoverage(m, b, nil)
	if strings.Join(itemKeys(c, false), " ") != "input:helper:sleep input:sleep outcome" {
		t.Errorf("spec_issue, nothing executed: %+v", c)
	}
	// spec_issue that ran and left outputs: also the environment and the command.
	b.OutputHashes = map[string]string{"results.json": covOut}
	c = dotlab.CheckLogCoverage(m, b, nil)
	if strings.Join(itemKeys(c, false), " ") != "environment input:helper:sleep input:sleep command output:results.json outcome" {
		t.Errorf("spec_issue, executed: %+v", c)
	}
}

// TestLogCoverageHostile: logs of any shape are judged, never refused or
// crashed on: non-JSON, wrong types, deep nesting, huge numbers, invalid
// UTF-8, a missing trailing newline; a very long missing list is cut.
func TestLogCoverageHostile(t *testing.T) {
	m, b := coverageFixture()
	hostile := []string{
		"", "\n\n", "not json", "[1,2,3]", "null", `{"step":`, `{"step":"inputs","data":"sleep"}`, `{"step":"inputs","data":[1]}`,
		`{"step":"inputs","data":{"name":7,"actual":true}}`, `{"step":["x"],"data":{}}`, `{"step":"compare","data":{"name":"mean_diff","rerun":1e999999}}`,
		`{"step":"compare","data":{"name":"mean_diff","rerun":` + strings.Repeat("9", 5000) + `}}`,
		`{"step":"execute","data":{"argv":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`,
		"{\"step\":\"outcome\",\"data\":{\"outcome\":\"\xff\xfe\"}}", `{"step":"outcome","data":{"outcome":"reproduced"}`,
	}
	for _, h := range hostile {
		if c := dotlab.CheckLogCoverage(m, b, []byte(h)); c.Covered != 0 || c.Complete {
			t.Errorf("%.60q covered something: %+v", h, c)
		}
	}
	// The last line needs no newline.
	if c := dotlab.CheckLogCoverage(m, b, bytes.TrimRight(covLog(), "\n")); !c.Complete {
		t.Errorf("no trailing newline: %+v", c)
	}
	b.OutputHashes = map[string]string{}
	for i := 0; i < 200; i++ {
		b.OutputHashes[fmt.Sprintf("f%03d", i)] = covOut
	}
	c := dotlab.CheckLogCoverage(m, b, covLog())
	if c.Required != 207 || len(c.Missing) != dotlab.MaxLogMissing+1 || c.Missing[dotlab.MaxLogMissing] != "… and 150 more items (see items)" {
		t.Errorf("many missing: required %d, %d missing lines, last %q", c.Required, len(c.Missing), c.Missing[len(c.Missing)-1])
	}
}

// BenchmarkLogCoverageWorstCase judges the largest accepted log (8 MiB) of
// lines that each make the check work hardest: a compare line for a target
// with a 1000-digit rerun value that is not the run's (so every line is
// compared as a number), and an inputs line with a near-miss hash. The cost
// is linear in the log: each line is parsed once.
func BenchmarkLogCoverageWorstCase(b *testing.B) {
	m, body := coverageFixture()
	var log []byte
	for i := 0; len(log) < 8<<20-2200; i++ {
		log = fmt.Appendf(log, `{"t":"x","level":"info","step":"compare","msg":"m","data":{"name":"mean_diff","rerun":%d%se-900}}`+"\n", i, strings.Repeat("7", 995))
		log = fmt.Appendf(log, `{"t":"x","level":"info","step":"inputs","msg":"m","data":{"name":"sleep","actual":"%063d"}}`+"\n", i)
	}
	b.SetBytes(int64(len(log)))
	for b.Loop() {
		if c := dotlab.CheckLogCoverage(m, body, log); c.Covered != 0 {
			b.Fatal("covered")
		}
	}
}
