package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/web"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		addr, dbURL string
		w           = dotlab.DefaultWindows
		opt         = serveOptions{
			settleEvery: time.Second,
			agentLimit:  httpapi.DefaultAgentLimit,
			anonLimit:   httpapi.DefaultAnonymousLimit,
		}
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the DotLab server: the /api/v1 JSON API and the settlement clock",
		Long: `Run the DotLab protocol server.

Storage is a SQLite file by default (--db sqlite:PATH) or PostgreSQL
(--db postgres://user@host:5432/dbname) for several server processes sharing
one database. Migrations are embedded and applied at start.

The windows and the review quorum are flags so that tests and demos can run a
whole lifecycle in seconds.

Claims are listed only when every URL they name is one a strict runner
fetches (https, public hosts, no file:// or local path, no credentials in
URLs); --allow-private-urls also admits private and loopback addresses,
plain http and git:// for a private deployment or the demo.

SIGINT or SIGTERM shut down gracefully: in-flight requests finish, then the
database closes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if w.Accept <= 0 || w.Publish <= 0 || w.Challenge <= 0 {
				return errors.New("--accept-window, --publish-window and --challenge-window must be positive durations (e.g. 60m, 24h)")
			}
			if w.Quorum < 1 || w.Quorum%2 == 0 {
				return fmt.Errorf("--review-quorum %d: must be a positive odd number so that a majority always exists", w.Quorum)
			}
			if opt.settleEvery <= 0 {
				return errors.New("--settle-every must be a positive duration (e.g. 1s)")
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			return serve(cmd.Context(), logger, addr, dbURL, w, opt, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "HOST:PORT to listen on")
	f.StringVar(&dbURL, "db", "sqlite:dotlab.db", "database: sqlite:PATH or postgres://…")
	f.DurationVar(&w.Accept, "accept-window", w.Accept, "how long a job offer stays open")
	f.DurationVar(&w.Publish, "publish-window", w.Publish, "how long an accepted job has to publish its run")
	f.DurationVar(&w.Challenge, "challenge-window", w.Challenge, "how long a published run can be challenged")
	f.IntVar(&w.Quorum, "review-quorum", w.Quorum, "votes that decide a dispute (odd)")
	f.DurationVar(&opt.settleEvery, "settle-every", opt.settleEvery, "how often the settlement clock expires offers, abandons missed jobs and settles closed windows")
	f.Float64Var(&opt.agentLimit.PerSecond, "rate-agent", opt.agentLimit.PerSecond, "requests per second per API key (0 disables)")
	f.IntVar(&opt.agentLimit.Burst, "rate-agent-burst", opt.agentLimit.Burst, "burst per API key")
	f.Float64Var(&opt.anonLimit.PerSecond, "rate-anon", opt.anonLimit.PerSecond, "requests per second per client address without a key (0 disables)")
	f.IntVar(&opt.anonLimit.Burst, "rate-anon-burst", opt.anonLimit.Burst, "burst per client address")
	f.BoolVar(&opt.allowPrivateURLs, "allow-private-urls", false, "list manifests whose URLs name loopback or private addresses, plain http or git:// (a private deployment or the demo; its runners need --allow-private-urls too); link-local and cloud-metadata addresses, file:// and local paths are refused either way")
	return cmd
}

// serveOptions are the server's operational settings beyond the protocol's
// windows.
type serveOptions struct {
	settleEvery           time.Duration
	agentLimit, anonLimit httpapi.RateLimit
	// allowPrivateURLs is --allow-private-urls (httpapi.Config.AllowPrivateURLs).
	allowPrivateURLs bool
}

// serve runs the server until ctx is cancelled, then shuts down gracefully.
// ready, when not nil, receives the bound address once listening.
func serve(ctx context.Context, logger *slog.Logger, addr, dbURL string, w dotlab.Windows, opt serveOptions, ready chan<- string) error {
	clock := dotlab.SystemClock{}
	db, err := sqlstore.Open(ctx, dbURL, sqlstore.Options{Clock: clock, Windows: w})
	if err != nil {
		return err
	}
	defer db.Close()
	leaks, err := leakcheck.New()
	if err != nil {
		return err
	}
	pages, err := web.New(web.Config{Store: db, Clock: clock, Logger: logger, Windows: w})
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{Store: db, Clock: clock, Logger: logger, Version: version, Leaks: leaks,
		AgentLimit: opt.agentLimit, AnonymousLimit: opt.anonLimit, AllowPrivateURLs: opt.allowPrivateURLs, Pages: pages})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	logger.Info("dotlab serving", "addr", ln.Addr().String(), "db", db.Dialect(), "accept_window", w.Accept, "publish_window", w.Publish, "challenge_window", w.Challenge, "quorum", w.Quorum)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	settleCtx, stopSettle := context.WithCancel(context.Background())
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		settleLoop(settleCtx, logger, db, opt.settleEvery, api.Notify)
	}()
	defer func() { stopSettle(); <-settled }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing in-flight requests")
	api.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	logger.Info("stopped cleanly")
	return nil
}

// settleLoop runs the settlement clock: at start (finishing whatever fell due
// while no server ran) and then every interval, until ctx ends. A sweep in
// progress finishes before the loop returns.
func settleLoop(ctx context.Context, logger *slog.Logger, db *sqlstore.DB, every time.Duration, notify func(claimID string)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := db.Settle(context.WithoutCancel(ctx))
		if err != nil {
			logger.Error("settlement sweep failed; retrying next tick", "err", err)
		} else if !rep.Empty() {
			logger.Info("settlement", "offers_expired", rep.OffersExpired, "jobs_abandoned", rep.JobsAbandoned, "claims_settled", rep.ClaimsSettled)
			for _, id := range rep.Changed {
				notify(id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
