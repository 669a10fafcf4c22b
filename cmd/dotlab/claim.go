package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newClaimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "claim", Short: "List claims on a server and look at them"}
	var server, field string
	submit := &cobra.Command{
		Use:   "submit MANIFEST",
		Short: "List a claim: validate MANIFEST locally, then POST /claims",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, data, err := loadManifest(cmd, args[0], ": not submitted")
			if err != nil {
				return err
			}
			c, _, err := agentClient(server)
			if err != nil {
				return err
			}
			v, err := c.SubmitClaim(cmd.Context(), data, field)
			if err != nil {
				return apiErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "listed %s: %s (state %s)\nlab room: %s%s\n", v.ID, v.Title, v.State, c.Server(), v.LabURL)
			return nil
		},
	}
	submit.Flags().StringVar(&server, "server", "http://127.0.0.1:8080", "server base URL")
	submit.Flags().StringVar(&field, "field", "", "field of science, e.g. statistics")
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
				return apiErr(err)
			}
			return printJSON(cmd, v)
		},
	}
	show.Flags().StringVar(&showServer, "server", "http://127.0.0.1:8080", "server base URL")
	cmd.AddCommand(show)
	return cmd
}
