package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newRerunCmd() *cobra.Command {
	var (
		outDir, runtimeName, cacheDir string
		asJSON, strict, allowPrivate  bool
		allowLocal                    string
	)
	cmd := &cobra.Command{
		Use:   "rerun MANIFEST",
		Short: "Rerun a manifest in a sandbox and record the outcome (no server needed)",
		Long: `Rerun MANIFEST locally: verify every input hash, resolve the image by digest
(local store first, then its registry), check out the code at the pinned
commit, run the entrypoint in an OCI sandbox (runc, or runsc with --runtime
runsc), compare each target exactly and record the outcome.

Writes into --out: run.json (the POST /runs body, job_id empty), logs.jsonl
(one JSON object per line) and out/ (the files the analysis wrote). Prints the
comparison table and the outcome, or run.json with --json.

Exit status: 0 whenever an outcome was recorded, whatever it is (reproduced,
not_reproduced, spec_issue, input_mismatch); 1 for an invalid manifest; 2 when
no outcome could be made (network or sandbox failure).

Fetching: this command reruns a manifest you chose, so by default it may
reach plain http, loopback and private addresses. It reads local files
(file:// URLs, local paths, local repositories) only with --allow-local DIR,
and then only inside DIR (no '..' or symlink out of it). Agents that take
work from a server use the strict policy instead (https only, public
addresses only, checked after DNS and on every redirect; never local files);
--strict-fetch applies it here too. Needs root (runc creates namespaces and
cgroups).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, _, err := loadManifest(cmd, args[0], fmt.Sprintf("; fix the problems above (dotlab manifest validate %s)", args[0]))
			if err != nil {
				return err
			}
			policy := runner.Policy{AllowPrivate: allowPrivate, LocalRoot: allowLocal}
			if strict {
				policy = runner.Policy{}
			}
			if runtimeName != "runc" && runtimeName != "runsc" {
				return fmt.Errorf("--runtime %q: want runc or runsc", runtimeName)
			}
			clock := time.Now
			if outDir == "" {
				outDir = "rerun-" + clock().UTC().Format("20060102T150405Z")
			}
			r, err := runner.New(cacheDir, sandbox.Runtime{Name: runtimeName}, policy, clock)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			if isTerminal(stderr) {
				p := &progressLine{w: stderr, clock: clock}
				r.Progress = p.update
				r.Echo = func(e runner.LogEntry) { p.line(e) }
			}
			rec, err := r.Rerun(cmd.Context(), m, outDir)
			if err != nil {
				return fmt.Errorf("no outcome recorded: %w (logs: %s)", err, filepath.Join(outDir, runner.LogsFile))
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(runner.MarshalBody(rec.Body))
				return err
			}
			printRecord(cmd.OutOrStdout(), rec, outDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&outDir, "out", "", "directory for run.json, logs.jsonl and out/ (default rerun-<UTC time>)")
	f.StringVar(&runtimeName, "runtime", "runc", "OCI runtime: runc or runsc (gVisor, ptrace platform)")
	f.StringVar(&cacheDir, "cache", defaultCacheDir(), "cache directory (images, downloads)")
	f.BoolVar(&asJSON, "json", false, "print run.json instead of the table")
	f.BoolVar(&allowPrivate, "allow-private-urls", true, "admit plain http, git://, loopback and private addresses")
	f.StringVar(&allowLocal, "allow-local", "", "admit file:// URLs, local paths and local repositories inside `DIR` only (default: none)")
	f.BoolVar(&strict, "strict-fetch", false, "use the agents' strict fetch policy (https, public addresses only, no local files)")
	return cmd
}

// printRecord prints the comparison table, the outcome and the notes.
func printRecord(w io.Writer, rec *runner.Record, outDir string) {
	if len(rec.Comparisons) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "target\tpublished\trerun\tdifference\ttolerance\tmatch")
		for _, c := range rec.Comparisons {
			match := "yes"
			if !c.Match {
				match = "NO"
			}
			tol := fmt.Sprintf("%s %s", c.ToleranceType, c.Tolerance)
			if c.ToleranceType == dotlab.ToleranceRelative {
				tol += fmt.Sprintf(" (±%s)", c.Allowed)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Published, c.Rerun, c.Difference, tol, match)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "outcome: %s\n", rec.Body.Outcome)
	if rec.Body.Notes != "" {
		fmt.Fprintf(w, "notes: %s\n", rec.Body.Notes)
	}
	fmt.Fprintf(w, "record: %s, %s, %s/\n", filepath.Join(outDir, runner.RunFile), filepath.Join(outDir, runner.LogsFile), filepath.Join(outDir, runner.OutSub))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressLine shows long steps on one rewritten terminal line and each log
// message on its own line.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	clock func() time.Time
	last  time.Time
	start map[string]time.Time
	dirty bool
}

func (p *progressLine) update(what string, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	if p.start == nil {
		p.start = map[string]time.Time{}
	}
	if _, ok := p.start[what]; !ok {
		p.start[what] = now
	}
	if now.Sub(p.last) < 100*time.Millisecond && done != total {
		return
	}
	p.last = now
	rate := ""
	if secs := now.Sub(p.start[what]).Seconds(); secs > 0 {
		rate = fmt.Sprintf(" %.0f MB/s", float64(done)/secs/1e6)
	}
	if total > 0 {
		fmt.Fprintf(p.w, "\r\033[K%s: %3.0f%% of %.1f MB%s", what, 100*float64(done)/float64(total), float64(total)/1e6, rate)
	} else {
		fmt.Fprintf(p.w, "\r\033[K%s: %.1f MB%s", what, float64(done)/1e6, rate)
	}
	p.dirty = true
}

func (p *progressLine) line(e runner.LogEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
	fmt.Fprintf(p.w, "%-11s %s\n", e.Step, strings.SplitN(e.Msg, "\n", 2)[0])
}
