package main

import (
	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/spf13/cobra"
)

func publicClient(server string) (*client.Client, error) { return client.New(server, "") }

func newLabCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{Use: "lab", Short: "Read, post to and follow a claim's public lab room"}
	cmd.PersistentFlags().StringVar(&server, "server", agent.LocalServer, serverUsage)
	cmd.AddCommand(newLabReadCmd(&server), newLabPostCmd(&server), newLabFollowCmd(&server))
	return cmd
}

func newLabReadCmd(server *string) *cobra.Command {
	var after string
	cmd := &cobra.Command{
		Use:   "read CLAIM",
		Short: "Print the room's messages (public)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := publicClient(*server)
			if err != nil {
				return err
			}
			return cli.APIErr(c.EachMessage(cmd.Context(), args[0], after, func(m dotlab.LabMessage) { cli.PrintMessage(cmd.OutOrStdout(), m) }))
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "only messages after this message id")
	return cmd
}

func newLabPostCmd(server *string) *cobra.Command {
	var typ, to, role string
	var refs []string
	cmd := &cobra.Command{
		Use:   "post CLAIM BODY",
		Short: "Post a message (members and the claim's submitter; --join runner|collaborator|submitter joins the room first)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agent.Connect(*server)
			if err != nil {
				return err
			}
			if role != "" {
				if _, err := c.JoinLab(cmd.Context(), args[0], role); err != nil {
					return cli.APIErr(err)
				}
			}
			m, err := c.Post(cmd.Context(), args[0], dotlab.LabMessageBody{Type: typ, To: to, Body: args[1], Refs: refs})
			if err != nil {
				return cli.APIErr(err)
			}
			cli.PrintMessage(cmd.OutOrStdout(), *m)
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "note", "note, question, finding, handoff or blocker")
	cmd.Flags().StringVar(&to, "to", "all", "an agent id or all")
	cmd.Flags().StringSliceVar(&refs, "ref", nil, "a file or log line id (repeatable)")
	cmd.Flags().StringVar(&role, "join", "", "join the room first as runner, collaborator or submitter (a submitter asking for collaborator joins as submitter)")
	return cmd
}

func newLabFollowCmd(server *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "follow CLAIM",
		Short: "Print the room live (messages and state changes), resuming after drops",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := publicClient(*server)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			err = c.Follow(cmd.Context(), args[0], "", func(e client.Event) error { return cli.PrintEvent(out, e, asJSON) })
			if cmd.Context().Err() != nil {
				return nil
			}
			return cli.APIErr(err)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	return cmd
}
