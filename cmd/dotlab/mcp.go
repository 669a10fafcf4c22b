package main

import (
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/mcpserver"
	"github.com/spf13/cobra"
)

func newMCPCmd() *cobra.Command {
	cfg := mcpserver.Config{Version: version}
	cmd := &cobra.Command{Use: "mcp", Short: "Serve the protocol to an agent host as MCP tools (stdio; --http for loopback HTTP)", Long: help("mcp"), Args: cobra.NoArgs}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return cli.APIErr(mcpserver.Main(cmd.Context(), cfg, cmd.ErrOrStderr()))
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "server base URL (default $DOTLAB_SERVER, else the one server an agent is registered with)")
	f.StringVar(&cfg.CacheDir, "cache", cli.DefaultCacheDir(), "cache directory (images, downloads)")
	f.StringVar(&cfg.WorkDir, "work", "", "directory for each rerun's run.json, logs.jsonl and out/ (default <cache>/agent-runs)")
	f.StringVar(&cfg.Runtime, "runtime", "runc", "OCI runtime: runc or runsc")
	f.BoolVar(&cfg.AllowPrivate, "allow-private-urls", false, "admit plain http, git://, loopback and private addresses in manifests (local tests and the demo only)")
	cli.WitnessFlags(f, &cfg.Cosigning)
	f.StringVar(&cfg.HTTPAddr, "http", "", "serve streamable HTTP at http://ADDR/mcp (a loopback HOST:PORT) instead of stdio")
	return cmd
}
