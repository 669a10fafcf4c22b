package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/verify"
	"github.com/spf13/cobra"
)

// agentFlags are shared by runner, challenger and review.
type agentFlags struct {
	server, cacheDir, workDir, runtimeName string
	allowPrivate                           bool
	loop                                   agent.LoopOptions
	cosigning                              verify.Cosigning
}

func (f *agentFlags) register(cmd *cobra.Command, loop bool) {
	serverFlag(cmd, &f.server)
	fl := cmd.Flags()
	fl.StringVar(&f.cacheDir, "cache", cli.DefaultCacheDir(), "cache directory (images, downloads)")
	fl.StringVar(&f.workDir, "work", "", "directory for each rerun's run.json, logs.jsonl and out/ (default <cache>/agent-runs)")
	fl.StringVar(&f.runtimeName, "runtime", "runc", "OCI runtime: runc or runsc")
	fl.BoolVar(&f.allowPrivate, "allow-private-urls", false, "admit plain http, git://, loopback and private addresses in manifests (local tests and the demo only)")
	cli.WitnessFlags(fl, &f.cosigning)
	if loop {
		fl.BoolVar(&f.loop.Once, "once", false, "do at most one unit of work, then exit")
		fl.DurationVar(&f.loop.Poll, "poll", 10*time.Second, "wait between polls when there is nothing to do")
	}
}

// newAgent builds an agent for the server's registered identity with the
// strict fetch policy (https, public addresses; checked after DNS and on
// every redirect) unless --allow-private-urls.
func (f *agentFlags) newAgent(cmd *cobra.Command) (*agent.Agent, error) {
	if err := checkRuntime(f.runtimeName); err != nil {
		return nil, err
	}
	a, _, err := agent.Open(cmd.Context(), f.server, agent.Config{KeepCheckpoints: true, Cosigning: f.cosigning, CacheDir: f.cacheDir, WorkDir: f.workDir,
		Runtime: f.runtimeName, AllowPrivate: f.allowPrivate}, cmd.ErrOrStderr())
	return a, cli.APIErr(err)
}

// loopCmd is a command that runs one agent loop (agent.Agent.RunLoop, ChallengeLoop).
func loopCmd(use, short, long string, loop func(*agent.Agent, context.Context, agent.LoopOptions) error) (*cobra.Command, *agentFlags) {
	var f agentFlags
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := f.newAgent(cmd)
			if err != nil {
				return err
			}
			return cli.APIErr(loop(a, cmd.Context(), f.loop))
		},
	}
	f.register(cmd, true)
	return cmd, &f
}

func newRunnerCmd() *cobra.Command {
	cmd, f := loopCmd("runner", "Take jobs from a server: draw, accept, rerun in the sandbox, publish", help("runner"), (*agent.Agent).RunLoop)
	cmd.Flags().IntVar(&f.loop.Parallel, "parallel", 1, "work up to N jobs at once, each in its own sandbox (draws only when one of the N slots is free)")
	cmd.PreRunE = func(*cobra.Command, []string) error { return cli.AtLeast("--parallel", f.loop.Parallel, 1) }
	return cmd
}

func newChallengerCmd() *cobra.Command {
	cmd, _ := loopCmd("challenger", "Rerun published runs in their challenge window and post challenges", help("challenger"), (*agent.Agent).ChallengeLoop)
	return cmd
}

func newReviewCmd() *cobra.Command {
	var (
		f                     agentFlags
		rerun, commit, reveal bool
		vote, rationale       string
	)
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Review the next dispute: show the evidence, optionally rerun, vote",
		Long:  help("review"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.ReviewFlags(rerun, commit, reveal, vote != ""); err != nil {
				return err
			}
			a, err := f.newAgent(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if reveal {
				return cli.APIErr(a.RevealAndReport(cmd.Context(), out))
			}
			if commit {
				a.Voter = a.CommitVote
			}
			rv, err := a.Review(cmd.Context(), func(ctx context.Context, d *dotlab.Dispute) (agent.Decision, error) {
				agent.ShowDispute(out, d)
				if rerun {
					return a.DecideByRerun(ctx, d)
				}
				return agent.Decision{Vote: vote, Rationale: rationale}, nil
			})
			if errors.Is(err, client.ErrNone) {
				fmt.Fprintln(out, "no dispute open for you")
				return nil
			} else if err != nil || rv.Result == nil {
				return cli.APIErr(err)
			}
			agent.ShowVoted(out, rv, commit)
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().BoolVar(&rerun, "rerun", false, "rerun the manifest locally and vote by the result")
	cmd.Flags().StringVar(&vote, "vote", "", "runner or challenger")
	cmd.Flags().StringVar(&rationale, "rationale", "", "20-2000 characters, naming at least one target of the dispute")
	cmd.Flags().BoolVar(&commit, "commit", false, "sealed votes: commit to the vote (its salt kept in <config dir>/sealed) instead of sending it; reveal it later with --reveal")
	cmd.Flags().BoolVar(&reveal, "reveal", false, "sealed votes: reveal every vote committed with --commit whose round is in its reveal phase, then stop")
	return cmd
}
