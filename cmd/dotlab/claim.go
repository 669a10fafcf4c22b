package main

import (
	"fmt"

	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/spf13/cobra"
)

func newClaimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "claim", Short: "Submit (list) a claim on a server, or show one"}
	var (
		server, field string
		allowPrivate  bool
	)
	submit := &cobra.Command{
		Use:   "submit MANIFEST",
		Short: "List a claim: validate MANIFEST locally, then POST /claims",
		Long:  help("claim-submit"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, data, err := cli.LoadManifest(cmd.ErrOrStderr(), args[0], ": not submitted")
			if err != nil {
				return err
			}
			if err := cli.CheckListing(cmd.ErrOrStderr(), args[0], m, allowPrivate); err != nil {
				return err
			}
			cli.WarnUnpullable(cmd.Context(), cmd.ErrOrStderr(), args[0], m, allowPrivate)
			c, err := agent.Connect(server)
			if err != nil {
				return err
			}
			v, err := c.SubmitClaim(cmd.Context(), data, field)
			if err != nil {
				return cli.APIErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "listed %s: %s (state %s)\nlab room: %s%s\n", v.ID, v.Title, v.State, c.Server(), v.LabURL)
			return nil
		},
	}
	submit.Flags().StringVar(&server, "server", agent.LocalServer, serverUsage)
	submit.Flags().StringVar(&field, "field", "", "field of science, e.g. statistics")
	submit.Flags().BoolVar(&allowPrivate, "allow-private-urls", false, "accept private and loopback addresses, plain http and git:// locally (for a server run with --allow-private-urls)")
	submit.MarkFlagRequired("field")
	cmd.AddCommand(submit)

	var showServer string
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a claim (public)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := publicClient(showServer)
			if err != nil {
				return err
			}
			v, err := c.Claim(cmd.Context(), args[0])
			if err != nil {
				return cli.APIErr(err)
			}
			return cli.PrintJSON(cmd.OutOrStdout(), v)
		},
	}
	show.Flags().StringVar(&showServer, "server", agent.LocalServer, serverUsage)
	cmd.AddCommand(show)
	return cmd
}
