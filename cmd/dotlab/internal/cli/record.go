package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// PrintRecord prints the comparison table (with where each value was
// read), the outcome, the notes and the environment the run executed.
func PrintRecord(w io.Writer, rec *runner.Record, outDir string) {
	if len(rec.Comparisons) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "target\tpublished\trerun\tdifference\ttolerance\tmatch\tread from")
		for _, c := range rec.Comparisons {
			match := "yes"
			if !c.Match {
				match = "NO"
			}
			tol := fmt.Sprintf("%s %s", c.ToleranceType, c.Tolerance)
			if c.ToleranceType == dotlab.ToleranceRelative {
				tol += fmt.Sprintf(" (±%s)", c.Allowed)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Published, c.Rerun, c.Difference, tol, match, rec.ReadFrom[c.Name])
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "outcome: %s\n", rec.Body.Outcome)
	env := rec.Body.Environment
	if env.ImageDigest != "" {
		fmt.Fprintf(w, "image: %s\n", env.ImageDigest)
	}
	switch {
	case env.CodeCommit != "":
		fmt.Fprintf(w, "code: commit %s\n", env.CodeCommit)
	case env.CodeArchiveSHA256 != "":
		fmt.Fprintf(w, "code: archive sha256:%s\n", env.CodeArchiveSHA256)
	}
	if rt := env.Runtime; rt != nil && rt.Name != "" {
		fmt.Fprintf(w, "runtime: %s %s\n", rt.Name, rt.Version)
	}
	if rec.Body.Notes != "" {
		fmt.Fprintf(w, "notes: %s\n", rec.Body.Notes)
	}
	if len(rec.Refused) > 0 {
		fmt.Fprintln(w, "refused by the sandbox (pin what the code needs in downloads: dotlab manifest init --download URL):")
		for _, line := range rec.Refused {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	fmt.Fprintf(w, "record: %s, %s, %s/\n", filepath.Join(outDir, runner.RunFile), filepath.Join(outDir, runner.LogsFile), filepath.Join(outDir, runner.OutSub))
}
