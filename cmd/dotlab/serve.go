package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/server"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	cfg.Version = version
	w := &cfg.Windows
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the DotLab server: the /api/v1 JSON API and the settlement clock",
		Long:  help("serve"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Check(); err != nil {
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
			return server.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "HOST:PORT to listen on")
	f.StringVar(&cfg.DB, "db", "sqlite:dotlab.db", "database: sqlite:PATH or postgres://…")
	cli.WindowFlags(f, w)
	cli.ConnFlags(f, &cfg.Conns)
	f.DurationVar(&cfg.DrainDelay, "drain-delay", 0, "on SIGTERM/SIGINT, keep serving this long with /healthz and /readyz answering 503 before closing the listener, so a balancer stops routing here first")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "then wait at most this long for in-flight requests (live event streams close at once, with a retry hint)")
	f.DurationVar(&cfg.SettleEvery, "settle-every", cfg.SettleEvery, "how often the settlement clock expires offers, abandons missed jobs and settles closed windows")
	f.Float64Var(&cfg.AgentLimit.PerSecond, "rate-agent", cfg.AgentLimit.PerSecond, "requests per second per API key (0 disables)")
	f.IntVar(&cfg.AgentLimit.Burst, "rate-agent-burst", cfg.AgentLimit.Burst, "burst per API key")
	f.Float64Var(&cfg.AnonymousLimit.PerSecond, "rate-anon", cfg.AnonymousLimit.PerSecond, "requests per second per client address without a key (0 disables)")
	f.IntVar(&cfg.AnonymousLimit.Burst, "rate-anon-burst", cfg.AnonymousLimit.Burst, "burst per client address")
	f.StringSliceVar(&cfg.TrustedProxies, "trusted-proxy", nil, "balancers in front of this server (CIDR or address, repeatable): their X-Forwarded-For names the client address the rate limit applies to")
	f.IntVar(&cfg.Messages.PerAgent, "msg-agent", cfg.Messages.PerAgent, "lab messages one agent may post per --msg-window, over all rooms (-1 disables)")
	f.IntVar(&cfg.Messages.PerRoom, "msg-room", cfg.Messages.PerRoom, "lab messages one room may take per --msg-window (-1 disables)")
	f.DurationVar(&cfg.Messages.Window, "msg-window", cfg.Messages.Window, "the window of --msg-agent and --msg-room")
	f.BoolVar(&cfg.UniqueNames, "unique-names", true, "refuse a new agent whose name reads as an existing agent's (Unicode confusables skeleton, case-insensitive)")
	f.IntVar(&cfg.StreamsPerAddr, "streams-per-addr", cfg.StreamsPerAddr, "live event streams one client address may hold (behind --trusted-proxy: the forwarded client; 0 disables)")
	f.StringVar(&cfg.LogOrigin, "log-origin", "", "the transparency log's origin and key name, e.g. dotlab.example.org/log (fixed at the first start; default a random dotlab.log/…)")
	f.StringVar(&cfg.PublicURL, "public-url", "", "where readers reach the pages, e.g. https://dotlab.example.org: the absolute links of /feed.atom, badges, JSON-LD and citations (default: relative links)")
	f.StringArrayVar(&cfg.Witnesses, "witness", nil, "a c2sp.org/tlog-witness witness to send each new checkpoint to, as URL=VERIFIER_KEY (its cosignature/v1 key; repeatable); the cosigned checkpoints are served with the log")
	cli.ArchiveFlags(cmd, &cfg.ArchiveDir, &cfg.Archive.MaxBlob, &cfg.Archive.PerClaim)
	f.BoolVar(&cfg.AllowPrivateURLs, "allow-private-urls", false, "list manifests whose URLs name loopback or private addresses, plain http or git://, and take runs whose logs_uri is plain http or names such a host (a private deployment or the demo; its runners need --allow-private-urls too); link-local and cloud-metadata addresses, file:// and local paths are refused either way")
	return cmd
}
