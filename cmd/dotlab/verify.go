package main

import (
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/verify"
	"github.com/spf13/cobra"
)

func newVerifyCmd() *cobra.Command {
	var server string
	var wit verify.Witness
	var verbose bool
	cmd := &cobra.Command{
		Use:   "verify CLAIM|RUN",
		Short: "Check a claim's or a run's records against the server's transparency log",
		Long:  help("verify"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := publicClient(server)
			if err != nil {
				return err
			}
			if wit.Path, err = agent.LogsPath(); err != nil {
				return err
			}
			return cli.APIErr(verify.Target(cmd.Context(), c, wit, args[0], cmd.OutOrStdout(), verbose))
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", agent.LocalServer, serverUsage)
	cli.WitnessFlags(f, &wit.Cosigning)
	f.StringVar(&wit.Key, "log-key", "", "the log's verifier key to require (default: the key pinned at first use, kept in the config dir)")
	f.BoolVarP(&verbose, "verbose", "v", false, "print every check that passed, not only failures")
	return cmd
}
