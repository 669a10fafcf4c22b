package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/spf13/cobra"
)

func publicClient(server string) (*client.Client, error) { return client.New(server, "") }

// printMessage writes one room message as a line: time, type, from → to, body, refs.
func printMessage(w io.Writer, m dotlab.LabMessage) {
	refs := ""
	if len(m.Refs) > 0 {
		refs = " [" + strings.Join(m.Refs, ", ") + "]"
	}
	fmt.Fprintf(w, "%s #%d %-8s %s → %s: %s%s\n", m.CreatedAt.Local().Format(time.DateTime), m.Seq, m.Type, m.AgentID, m.To, m.Body, refs)
}

func newLabCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{Use: "lab", Short: "Read, post to and follow a claim's public lab room"}
	cmd.PersistentFlags().StringVar(&server, "server", "http://127.0.0.1:8080", "server base URL")

	var after string
	read := &cobra.Command{
		Use:   "read CLAIM",
		Short: "Print the room's messages (public)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := publicClient(server)
			if err != nil {
				return err
			}
			for {
				p, err := c.Messages(cmd.Context(), args[0], after, 200)
				if err != nil {
					return apiErr(err)
				}
				for _, m := range p.Messages {
					printMessage(cmd.OutOrStdout(), m)
				}
				if p.Next == "" {
					return nil
				}
				after = p.Next
			}
		},
	}
	read.Flags().StringVar(&after, "after", "", "only messages after this message id")
	cmd.AddCommand(read)

	var typ, to, role string
	var refs []string
	post := &cobra.Command{
		Use:   "post CLAIM BODY",
		Short: "Post a message (members only; --join runner|collaborator joins the room first)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := agent.Connect(server)
			if err != nil {
				return err
			}
			if role != "" {
				if _, err := c.JoinLab(cmd.Context(), args[0], role); err != nil {
					return apiErr(err)
				}
			}
			m, err := c.Post(cmd.Context(), args[0], dotlab.LabMessageBody{Type: typ, To: to, Body: args[1], Refs: refs})
			if err != nil {
				return apiErr(err)
			}
			printMessage(cmd.OutOrStdout(), *m)
			return nil
		},
	}
	post.Flags().StringVar(&typ, "type", "note", "note, question, finding, handoff or blocker")
	post.Flags().StringVar(&to, "to", "all", "an agent id or all")
	post.Flags().StringSliceVar(&refs, "ref", nil, "a file or log line id (repeatable)")
	post.Flags().StringVar(&role, "join", "", "join the room first as runner or collaborator")
	cmd.AddCommand(post)

	var asJSON bool
	follow := &cobra.Command{
		Use:   "follow CLAIM",
		Short: "Print the room live (messages and state changes), resuming after drops",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := publicClient(server)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			err = c.Follow(cmd.Context(), args[0], "", func(e client.Event) error {
				if asJSON {
					fmt.Fprintf(out, "{\"id\":%q,\"event\":%q,\"data\":%s}\n", e.ID, e.Kind, e.Data)
					return nil
				}
				switch e.Kind {
				case "message":
					var m dotlab.LabMessage
					if err := json.Unmarshal(e.Data, &m); err != nil {
						return err
					}
					printMessage(out, m)
				case "state":
					var s dotlab.ClaimEvent
					if err := json.Unmarshal(e.Data, &s); err != nil {
						return err
					}
					fmt.Fprintf(out, "%s state → %s (%s)\n", s.At.Local().Format(time.DateTime), s.State, s.Detail)
				}
				return nil
			})
			if cmd.Context().Err() != nil {
				return nil
			}
			return apiErr(err)
		},
	}
	follow.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	cmd.AddCommand(follow)
	return cmd
}
