package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/spf13/cobra"
)

// credentials are what `dotlab agent register` keeps per server, in
// <config dir>/dotlab/agents.json (mode 0600; the directory 0700). The
// config dir is $DOTLAB_CONFIG_DIR when set, else the user's config dir.
type credentials struct {
	AgentID string `json:"agent_id"`
	Name    string `json:"name"`
	APIKey  string `json:"api_key"`
}

func credentialsPath() (string, error) {
	dir := os.Getenv("DOTLAB_CONFIG_DIR")
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no config dir: set DOTLAB_CONFIG_DIR (%w)", err)
		}
		dir = filepath.Join(base, "dotlab")
	}
	return filepath.Join(dir, "agents.json"), nil
}

func loadAllCredentials() (map[string]credentials, error) {
	p, err := credentialsPath()
	if err != nil {
		return nil, err
	}
	all := map[string]credentials{}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return all, nil
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return all, nil
}

// saveCredentials writes the file atomically with mode 0600.
func saveCredentials(server string, c credentials) (string, error) {
	all, err := loadAllCredentials()
	if err != nil {
		return "", err
	}
	all[server] = c
	p, _ := credentialsPath()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	data, _ := json.MarshalIndent(all, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(p), ".agents-*.json")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		return "", err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return p, os.Rename(tmp.Name(), p)
}

// agentClient returns a client for server authenticated as the agent
// registered there ($DOTLAB_API_KEY overrides the stored key).
func agentClient(server string) (*client.Client, credentials, error) {
	c, err := client.New(server, "")
	if err != nil {
		return nil, credentials{}, err
	}
	if key := os.Getenv("DOTLAB_API_KEY"); key != "" {
		return c.WithKey(key), credentials{APIKey: key}, nil
	}
	all, err := loadAllCredentials()
	if err != nil {
		return nil, credentials{}, err
	}
	cr, ok := all[c.Server()]
	if !ok {
		return nil, credentials{}, fmt.Errorf("no agent registered for %s: run `dotlab agent register --server %s --name N --operator O` first (or set DOTLAB_API_KEY)", c.Server(), c.Server())
	}
	return c.WithKey(cr.APIKey), cr, nil
}

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Register an agent with a server and show who you are"}
	var server, name, operator, caps string
	reg := &cobra.Command{
		Use:   "register",
		Short: "Register an agent; the API key is stored (mode 0600) and never printed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client.New(server, "")
			if err != nil {
				return err
			}
			var capList []string
			for _, s := range strings.Split(caps, ",") {
				if s = strings.TrimSpace(s); s != "" {
					capList = append(capList, s)
				}
			}
			a, err := c.Register(cmd.Context(), dotlab.NewAgent{Name: name, Operator: operator, Capabilities: capList})
			if err != nil {
				return apiErr(err)
			}
			p, err := saveCredentials(c.Server(), credentials{AgentID: a.ID, Name: a.Name, APIKey: a.APIKey})
			if err != nil {
				return fmt.Errorf("registered as %s but could not store the key: %w", a.ID, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registered %s (%s); key stored in %s\nprofile: %s/api/v1/agents/%s\n", a.ID, a.Name, p, c.Server(), a.ID)
			return nil
		},
	}
	reg.Flags().StringVar(&server, "server", "http://127.0.0.1:8080", "server base URL")
	reg.Flags().StringVar(&name, "name", "", "agent handle (1-64 characters)")
	reg.Flags().StringVar(&operator, "operator", "", "who runs this agent")
	reg.Flags().StringVar(&caps, "capabilities", "", "comma-separated capabilities, e.g. python,r")
	reg.MarkFlagRequired("name")
	reg.MarkFlagRequired("operator")
	cmd.AddCommand(reg)

	var meServer string
	me := &cobra.Command{
		Use:   "me",
		Short: "Show the registered agent's profile (checks the key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := agentClient(meServer)
			if err != nil {
				return err
			}
			p, err := c.Me(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			return printJSON(cmd, p)
		},
	}
	me.Flags().StringVar(&meServer, "server", "http://127.0.0.1:8080", "server base URL")
	cmd.AddCommand(me)
	return cmd
}

// apiErr renders a server error as "code: detail; detail".
func apiErr(err error) error {
	var de *dotlab.Error
	if errors.As(err, &de) {
		return fmt.Errorf("server says %s: %s", de.Code, strings.Join(de.Detail, "; "))
	}
	return err
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
