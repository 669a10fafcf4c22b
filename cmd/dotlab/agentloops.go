package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/spf13/cobra"
)

// agentFlags are shared by runner, challenger and review.
type agentFlags struct {
	server, cacheDir, workDir, runtimeName string
	allowPrivate, once                    bool
	poll                                  time.Duration
}

func (f *agentFlags) register(cmd *cobra.Command, loop bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.server, "server", "http://127.0.0.1:8080", "server base URL")
	fl.StringVar(&f.cacheDir, "cache", defaultCacheDir(), "cache directory (images, downloads)")
	fl.StringVar(&f.workDir, "work", "", "directory for each rerun's run.json, logs.jsonl and out/ (default <cache>/agent-runs)")
	fl.StringVar(&f.runtimeName, "runtime", "runc", "OCI runtime: runc or runsc")
	fl.BoolVar(&f.allowPrivate, "allow-private-urls", false, "admit plain http, git://, loopback and private addresses in manifests (local tests and the demo only)")
	if loop {
		fl.BoolVar(&f.once, "once", false, "do at most one unit of work, then exit")
		fl.DurationVar(&f.poll, "poll", 10*time.Second, "wait between polls when there is nothing to do")
	}
}

// newAgent builds an agent for the server's registered identity with the
// strict fetch policy (https, public addresses; checked after DNS and on
// every redirect) unless --allow-private-urls.
func (f *agentFlags) newAgent(cmd *cobra.Command) (*agent.Agent, error) {
	if f.runtimeName != "runc" && f.runtimeName != "runsc" {
		return nil, fmt.Errorf("--runtime %q: want runc or runsc", f.runtimeName)
	}
	c, _, err := agentClient(f.server)
	if err != nil {
		return nil, err
	}
	me, err := c.Me(cmd.Context())
	if err != nil {
		return nil, apiErr(err)
	}
	eng, err := runner.New(f.cacheDir, sandbox.Runtime{Name: f.runtimeName}, runner.Policy{AllowPrivate: f.allowPrivate}, time.Now)
	if err != nil {
		return nil, err
	}
	work := f.workDir
	if work == "" {
		work = filepath.Join(f.cacheDir, "agent-runs")
	}
	caps := localCapabilities(me.Capabilities)
	out := cmd.ErrOrStderr()
	return &agent.Agent{Client: c, Engine: eng, Capabilities: caps, WorkDir: work, Clock: time.Now,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(out, "%s %s: %s\n", time.Now().Format(time.TimeOnly), me.Name, fmt.Sprintf(format, args...))
		}}, nil
}

// localCapabilities is what this machine really provides of the registered
// capabilities: gpu only when a GPU device exists.
func localCapabilities(registered []string) []string {
	var out []string
	for _, c := range registered {
		if c == "gpu" {
			if _, err := os.Stat("/dev/nvidia0"); err != nil {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// loop calls step until ctx ends (or once), waiting poll when step found
// nothing; a 401 stops at once, other errors are reported and retried.
func loop(ctx context.Context, once bool, poll time.Duration, logf func(string, ...any), step func(context.Context) (string, error)) error {
	for {
		id, err := step(ctx)
		if client.IsUnauthorized(err) {
			return apiErr(err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logf("%v", err)
		}
		if once {
			if err != nil {
				return err
			}
			if id == "" {
				logf("nothing to do")
			}
			return nil
		}
		if id == "" || err != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(poll):
			}
		}
	}
}

func newRunnerCmd() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "runner",
		Short: "Take jobs from a server: draw, accept, rerun in the sandbox, publish",
		Long: `Work as a runner: GET /jobs/next; decline with capability_mismatch when the
manifest needs what this agent lacks; accept; join the lab room as runner and
post progress (a note at each stage, a finding when a value is outside
tolerance, a blocker when stuck); rerun with the sandbox engine; upload the
JSON-lines log; publish the run within the window. Needs root (runc).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := f.newAgent(cmd)
			if err != nil {
				return err
			}
			return loop(cmd.Context(), f.once, f.poll, a.Logf, a.RunOnce)
		},
	}
	f.register(cmd, true)
	return cmd
}

func newChallengerCmd() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "challenger",
		Short: "Rerun published runs in their challenge window and post challenges",
		Long: `Work as a challenger: pick a run in its challenge window, rerun the manifest
independently (the runner's record and logs are read only after the rerun),
then POST /challenges with agrees and, on disagreement, notes naming each
differing comparison and by how much. Runs this agent holds a role on are
skipped (the server refuses them). Needs root (runc).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := f.newAgent(cmd)
			if err != nil {
				return err
			}
			return loop(cmd.Context(), f.once, f.poll, a.Logf, a.ChallengeOnce)
		},
	}
	f.register(cmd, true)
	return cmd
}

func newReviewCmd() *cobra.Command {
	var (
		f               agentFlags
		rerun           bool
		vote, rationale string
	)
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Review the next dispute: show the evidence, optionally rerun, vote",
		Long: `Review a dispute: GET /disputes/next draws one at random among disputes this
agent holds no role on, and shows the manifest's targets with the run's and
the challenges' values side by side. Then either:
  --rerun                             rerun locally and vote for the side the
                                      rerun reproduces, citing the comparisons
  --vote runner|challenger --rationale TEXT   vote by hand (20-2000 characters)
Without either, only shows the evidence (the dispute stays assigned to you).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rerun && vote != "" {
				return errors.New("give --rerun or --vote, not both")
			}
			a, err := f.newAgent(cmd)
			if err != nil {
				return err
			}
			d, err := a.Client.NextDispute(cmd.Context())
			if errors.Is(err, client.ErrNone) {
				fmt.Fprintln(cmd.OutOrStdout(), "no dispute open for you")
				return nil
			} else if err != nil {
				return apiErr(err)
			}
			agent.ShowDispute(cmd.OutOrStdout(), d)
			var dec agent.Decision
			switch {
			case rerun:
				if dec, err = a.DecideByRerun(cmd.Context(), d); err != nil {
					return err
				}
			case vote != "":
				dec = agent.Decision{Vote: vote, Rationale: rationale}
			default:
				return nil
			}
			res, err := a.Client.Vote(cmd.Context(), d.ID, dotlab.VoteBody{Vote: dec.Vote, Rationale: dec.Rationale})
			if err != nil {
				return apiErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "voted %s on %s (%d of %d votes in; claim %s %s)\n", dec.Vote, d.ID, len(res.Votes), res.Quorum, res.Claim.State, res.Claim.Outcome)
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().BoolVar(&rerun, "rerun", false, "rerun the manifest locally and vote by the result")
	cmd.Flags().StringVar(&vote, "vote", "", "runner or challenger")
	cmd.Flags().StringVar(&rationale, "rationale", "", "20-2000 characters, tied to specific comparisons")
	return cmd
}
