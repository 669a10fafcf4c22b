package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/sandbox"
)

// StreamKeyPrefix starts the output_hashes keys of the captured streams,
// "stream:stdout" and "stream:stderr" (docs/protocol.md §6 "output_hashes"):
// no output file can take them, because a file under /work/out whose path
// starts with "stream:" is left out of output_hashes (reportOutputs).
const StreamKeyPrefix = "stream:"

// streamSum hashes everything written to one stream of the analysis.
type streamSum struct {
	h hash.Hash
	n int64
}

func (s *streamSum) Write(p []byte) (int, error) {
	s.h.Write(p)
	s.n += int64(len(p))
	return len(p), nil
}

// hashStreams tees the sandbox's stdout and stderr into SHA-256 sums kept in c.
func hashStreams(c *captured, stdio sandbox.IO) sandbox.IO {
	c.sums = map[string]*streamSum{"stdout": {h: sha256.New()}, "stderr": {h: sha256.New()}}
	stdio.Stdout = io.MultiWriter(stdio.Stdout, c.sums["stdout"])
	stdio.Stderr = io.MultiWriter(stdio.Stderr, c.sums["stderr"])
	return stdio
}

// streamOutputs are the captured streams as output_hashes entries: the
// SHA-256 of every byte the analysis wrote to each (evidence a challenger
// compares; equal only where the program's output is deterministic).
func streamOutputs(c *captured) []output {
	var outs []output
	for _, name := range []string{"stdout", "stderr"} {
		if s := c.sums[name]; s != nil {
			outs = append(outs, output{StreamKeyPrefix + name, hex.EncodeToString(s.h.Sum(nil)), s.n, " (captured stream)"})
		}
	}
	return outs
}

// reservedKey reports whether an output file's key would take a stream's.
func reservedKey(o output) bool {
	return strings.HasPrefix(strings.ToLower(o.key), StreamKeyPrefix) && o.what != " (captured stream)"
}

// recordUncompared keeps, for a run that executed but did not finish as
// the execution contract requires (the caller has its spec_issue), the
// value each target's source could still read, in facts.uncompared and
// the log, marked not compared (docs/protocol.md §6 "What was printed"):
// results.json first when it has the target (as in compare), else the
// target's source. What cannot be read is left out.
func recordUncompared(log *Log, m *dotlab.Manifest, out *outputs, f *facts) {
	optional := make([]dotlab.Target, len(m.Targets))
	for i, t := range m.Targets {
		t.Source = &dotlab.TargetSource{} // every target optional in results.json
		optional[i] = t
	}
	fromResults, _, err := readResults(out.outDir, optional)
	if err != nil {
		fromResults = nil // a malformed results.json gives no values
	}
	for _, t := range m.Targets {
		u := dotlab.UncomparedValue{Name: t.Name}
		if v, ok := fromResults[t.Name]; ok {
			u.Value, u.Source = v, dotlab.SourceOutDir+"results.json"
		} else if t.Source != nil {
			v, problem := out.extract(*t.Source)
			if problem != "" {
				continue
			}
			u.Value, u.Source = v, t.Source.Where()+", "+t.Source.Rule()
		} else {
			continue
		}
		u.Source = dotlab.CutUncomparedSource(u.Source) // on a rune boundary, within the server's bound
		log.Warn("results", "target "+t.Name+" read but not compared (the run did not finish as required)",
			map[string]any{"name": t.Name, "value": u.Value, "source": u.Source, "compared": false})
		f.uncompared = append(f.uncompared, u)
	}
}
