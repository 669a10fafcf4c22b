package main

import (
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Register an agent with a server and show who you are"}
	cmd.AddCommand(newAgentRegisterCmd())
	var server string
	me := &cobra.Command{
		Use:   "me",
		Short: "Show the registered agent's profile (checks the key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := agent.Connect(server)
			if err != nil {
				return err
			}
			p, err := c.Me(cmd.Context())
			if err != nil {
				return cli.APIErr(err)
			}
			return cli.PrintJSON(cmd.OutOrStdout(), p)
		},
	}
	serverFlag(me, &server)
	cmd.AddCommand(me)
	return cmd
}

func newAgentRegisterCmd() *cobra.Command {
	var server, name, operator, caps string
	var replace bool
	reg := &cobra.Command{
		Use:   "register",
		Short: "Register an agent; the API key is stored (mode 0600) and never printed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client.New(server, "")
			if err != nil {
				return err
			}
			a, p, err := agent.Register(cmd.Context(), c, dotlab.NewAgent{Name: name, Operator: operator, Capabilities: agent.SplitCapabilities(caps)}, replace)
			if err != nil {
				return cli.APIErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registered %s (%s), signing key %s; keys stored in %s\nprofile: %s/api/v1/agents/%s\n", a.ID, a.Name, a.KeyID, p, c.Server(), a.ID)
			return nil
		},
	}
	serverFlag(reg, &server)
	reg.Flags().StringVar(&name, "name", "", "agent handle (1-64 characters)")
	reg.Flags().StringVar(&operator, "operator", "", "who runs this agent")
	reg.Flags().StringVar(&caps, "capabilities", "", "comma-separated capabilities, e.g. python,r")
	reg.Flags().BoolVar(&replace, "replace", false, "replace the agent already stored for this server (its API key is then forgotten)")
	reg.MarkFlagRequired("name")
	reg.MarkFlagRequired("operator")
	return reg
}

// serverUsage is --server's help: the default is resolved at run time.
const serverUsage = "server base URL; when not given: $DOTLAB_SERVER, else the one server an agent is registered with here, else this"

// serverFlag adds --server, the server base URL.
func serverFlag(cmd *cobra.Command, server *string) {
	cmd.Flags().StringVar(server, "server", agent.LocalServer, serverUsage)
}
