package demo

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/dotlab/dotlab"
)

// PrintTable prints the final table, one claim a line sorted by id: its
// outcome, state, how it settled and its lab room under base. It returns an
// error when a claim settled with another verdict than its published
// numbers lead to (Example.Expect).
func PrintTable(out io.Writer, base string, results []Result) error {
	sort.Slice(results, func(i, j int) bool { return results[i].Claim.ID < results[j].Claim.ID })
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tTITLE\tOUTCOME\tSTATE\tHOW IT SETTLED\tLAB ROOM")
	for _, r := range results {
		title := r.Example.Title
		if len(title) > 60 {
			title = title[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/labs/%s\n", r.Claim.ID, title, r.Claim.Outcome, r.Claim.State, howSettled(r), base, r.Claim.ID)
	}
	tw.Flush()
	printValues(out, results)
	var lines []string
	for _, r := range results {
		if r.Claim.Outcome != r.Example.Expect {
			lines = append(lines, fmt.Sprintf("%s: %s, expected %s", r.Claim.ID, r.Claim.Outcome, r.Example.Expect))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(out, "\nUNEXPECTED: %s\n", strings.Join(lines, "; "))
		return fmt.Errorf("unexpected verdicts: %s", strings.Join(lines, "; "))
	}
	fmt.Fprintln(out, "\nEvery claim settled with the verdict its published numbers lead to.")
	return nil
}

// howSettled is the table's HOW IT SETTLED column.
func howSettled(r Result) string {
	switch {
	case r.Disputed:
		t := dotlab.CountVotes(r.Votes)
		return fmt.Sprintf("dispute: %d-%d for the %s", max(t.Runner, t.Challenger), min(t.Runner, t.Challenger), t.Majority())
	case r.Run != nil && r.Run.Outcome.Compared():
		return fmt.Sprintf("window closed, %d agreeing challenge(s)", len(r.Challs))
	}
	return "settled at once"
}

// printValues prints, for every claim whose run compared values, each
// target's published value and tolerance beside the official run's rerun
// value and each challenger's (a dispute's staged misreport shows as the
// run's value, the challenger's as the honest one).
func printValues(out io.Writer, results []Result) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tTARGET\tPUBLISHED\tTOLERANCE\tRUN\tCHALLENGE\tRUN MATCH")
	for _, r := range results {
		if r.Run == nil || !r.Run.Outcome.Compared() {
			continue
		}
		for _, c := range r.Run.Comparisons {
			var challs []string
			for _, ch := range r.Challs {
				for _, cc := range ch.Comparisons {
					if cc.Name == c.Name {
						challs = append(challs, cc.Rerun.String())
					}
				}
			}
			match := "yes"
			if !c.Match {
				match = "no"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\n", r.Claim.ID, c.Name, c.Published, c.ToleranceType, c.Tolerance, c.Rerun, strings.Join(challs, ", "), match)
		}
	}
	tw.Flush()
	fmt.Fprintln(out, "RUN MATCH is the official run's value against the tolerance; a dispute may overturn the run, so the claim's outcome is the table above's.")
}
