package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/spf13/cobra"
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
		Long:  help("rerun"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, _, err := cli.LoadManifest(cmd.ErrOrStderr(), args[0], fmt.Sprintf("; fix the problems above (dotlab manifest validate %s)", args[0]))
			if err != nil {
				return err
			}
			if strict && allowLocal != "" {
				return fmt.Errorf("--strict-fetch refuses local files: drop --allow-local %s, or --strict-fetch", allowLocal)
			}
			policy := runner.Policy{AllowPrivate: allowPrivate, LocalRoot: allowLocal, TrustCAFile: os.Getenv(runner.TrustCAEnv)}
			if strict {
				policy = runner.Policy{TrustCAFile: policy.TrustCAFile}
			}
			if err := checkRuntime(runtimeName); err != nil {
				return err
			}
			clock := dotlab.SystemClock{}
			if outDir == "" {
				outDir = "rerun-" + clock.Now().Format("20060102T150405Z")
			}
			r, err := runner.New(cacheDir, sandbox.Runtime{Name: runtimeName}, policy, clock)
			if err != nil {
				return err
			}
			return rerun(cmd, r, m, outDir, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&outDir, "out", "", "directory for run.json, logs.jsonl and out/ (default rerun-<UTC time>)")
	f.StringVar(&runtimeName, "runtime", "runc", "OCI runtime: runc or runsc (gVisor, ptrace platform)")
	f.StringVar(&cacheDir, "cache", cli.DefaultCacheDir(), "cache directory (images, downloads)")
	f.BoolVar(&asJSON, "json", false, "print run.json instead of the table")
	f.BoolVar(&allowPrivate, "allow-private-urls", true, "admit plain http, git://, loopback and private addresses")
	f.StringVar(&allowLocal, "allow-local", "", "admit file:// URLs and local repositories inside `DIR` only (default: none)")
	f.BoolVar(&strict, "strict-fetch", false, "use the agents' strict fetch policy (https, public addresses only, no local files)")
	return cmd
}

// rerun reruns m into outDir with r, showing progress on a terminal, and
// prints the table (or run.json with asJSON).
func rerun(cmd *cobra.Command, r *runner.Runner, m *dotlab.Manifest, outDir string, asJSON bool) error {
	if stderr := cmd.ErrOrStderr(); cli.IsTerminal(stderr) {
		p := cli.NewProgress(stderr, r.Clock)
		r.Progress, r.Echo = p.Update, p.Line
	}
	rec, err := r.Rerun(cmd.Context(), m, outDir)
	if err != nil {
		return fmt.Errorf("no outcome recorded: %w (logs: %s)", err, filepath.Join(outDir, runner.LogsFile))
	}
	if asJSON {
		_, err := cmd.OutOrStdout().Write(runner.MarshalBody(rec.Body))
		return err
	}
	cli.PrintRecord(cmd.OutOrStdout(), rec, outDir)
	return nil
}

// checkRuntime checks --runtime.
func checkRuntime(name string) error {
	if name != "runc" && name != "runsc" {
		return fmt.Errorf("--runtime %q: want runc or runsc", name)
	}
	return nil
}
