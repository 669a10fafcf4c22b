// Package server assembles the DotLab protocol server from its parts: the
// store (sqlstore), the secret screen (leakcheck), the public pages (web),
// the /api/v1 handlers (httpapi) and the settlement clock (SettleLoop), and
// runs it until its context ends. `dotlab serve` and the demo start it.
//
// The windows, the quorum and the settlement clock are those of
// docs/mechanism.md §2 and §5; the listing rules behind AllowPrivateURLs
// are docs/manifest-spec.md's and docs/threat-model.md's.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/inputarchive"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/metrics"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/translog"
	"github.com/dotlab/dotlab/web"
)

// Config is one server's settings.
type Config struct {
	Addr string // HOST:PORT to listen on (port 0: any free port)
	DB   string // sqlite:PATH or postgres://…
	// Windows are the protocol's windows and review quorum.
	Windows dotlab.Windows
	// SettleEvery is the period of the settlement clock (must be positive).
	SettleEvery time.Duration
	// AgentLimit applies per API key, AnonymousLimit per client address
	// without a key; the zero RateLimit disables a limit.
	AgentLimit, AnonymousLimit httpapi.RateLimit
	// TrustedProxies are the balancers in front of this server, as CIDRs
	// (10.0.0.0/24) or addresses: requests from them are rate-limited by
	// the client address their X-Forwarded-For names
	// (httpapi.Config.TrustedProxies; docs/deploy.md "Rate limits").
	TrustedProxies []string
	// Conns bound connections per client address (ConnLimits; zero
	// timeouts take DefaultConnLimits' values).
	Conns ConnLimits
	// StreamsPerAddr bounds live event streams per client address, the
	// forwarded client behind a trusted proxy
	// (httpapi.Config.MaxStreamsPerAddr; 0: no limit; DefaultConfig sets
	// httpapi.DefaultStreamsPerAddr).
	StreamsPerAddr int
	// UniqueNames refuses look-alike agent names
	// (sqlstore.Options.UniqueNames).
	UniqueNames bool
	// Messages bounds lab messages per agent and per room
	// (httpapi.Config.MessageQuota).
	Messages httpapi.MessageQuota
	// AllowPrivateURLs lists manifests naming loopback or private addresses,
	// plain http or git://, and takes such logs_uri values on runs
	// (httpapi.Config.AllowPrivateURLs).
	AllowPrivateURLs bool
	// LogOrigin is the transparency log's origin, fixed at the first start
	// (sqlstore.Options.LogOrigin).
	LogOrigin string
	// ArchiveDir holds the input archive on disk (`--archive-dir`; ""
	// keeps none: the archive routes answer 404), blobs by SHA-256
	// (inputarchive.Dir; docs/deploy.md "Input archive"), and Archive its
	// bounds per blob and per claim (zero: protocol.DefaultArchiveLimits).
	ArchiveDir string
	Archive    protocol.ArchiveLimits
	// PublicURL is where readers reach the pages, scheme and host only
	// ("https://dotlab.example.org"): the absolute links of the Atom feed,
	// badges' markdown, JSON-LD and citations (web.Config.PublicURL).
	PublicURL string
	// Witnesses are the c2sp.org/tlog-witness witnesses the log's
	// checkpoints are sent to, each "URL=VERIFIER_KEY"
	// (translog.ParseWitness; docs/deploy.md "Witnesses"), at most
	// translog.MaxWitnesses.
	Witnesses []string
	// WitnessEvery is how often the log looks for a checkpoint to send
	// them (default 1 s).
	WitnessEvery time.Duration
	Version      string       // reported by GET /api/v1/status
	Logger       *slog.Logger // required
	Clock        dotlab.Clock // default dotlab.SystemClock
	// Ready, when not nil, receives the bound address once listening.
	Ready chan<- string
	// DrainDelay is how long the server keeps serving after ctx ends with
	// GET /healthz and /readyz answering 503, so that a balancer's health
	// checks take it out of rotation before the listener closes (0: none;
	// docs/deploy.md "Draining").
	DrainDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests once the
	// listener has closed (default 30 s); past it the remaining
	// connections are closed and Run returns an error.
	ShutdownTimeout time.Duration
}

// DefaultConfig is `dotlab serve` without flags: the protocol's default
// windows (dotlab.DefaultWindows), a sweep every second and the default rate
// limits. Addr, DB and Logger are left to the caller.
func DefaultConfig() Config {
	return Config{Windows: dotlab.DefaultWindows, SettleEvery: time.Second,
		AgentLimit: httpapi.DefaultAgentLimit(), AnonymousLimit: httpapi.DefaultAnonymousLimit(),
		Conns: DefaultConnLimits(), StreamsPerAddr: httpapi.DefaultStreamsPerAddr, Messages: httpapi.DefaultMessageQuota(),
		Archive: protocol.DefaultArchiveLimits()}
}

// Check reports the first setting the server cannot run with, naming the
// setting (`dotlab serve` documents the flag of each).
func (c Config) Check() error {
	w := c.Windows
	switch {
	case w.Accept <= 0 || w.Publish <= 0 || w.Challenge <= 0:
		return errors.New("the accept, publish and challenge windows must be positive durations (e.g. 60m, 24h)")
	case w.Quorum < 1 || w.Quorum%2 == 0:
		return fmt.Errorf("review quorum %d: must be a positive odd number so that a majority always exists", w.Quorum)
	case w.Sealed && (w.Commit <= 0 || w.Reveal <= 0):
		return errors.New("sealed votes need positive commit and reveal windows (e.g. 24h)")
	case c.SettleEvery <= 0:
		return errors.New("the settlement period must be a positive duration (e.g. 1s)")
	case c.DrainDelay < 0 || c.ShutdownTimeout < 0:
		return errors.New("the drain delay and the shutdown timeout must not be negative (e.g. 5s, 30s)")
	case c.Conns.PerAddr < 0 || c.Conns.IdlePerAddr < 0 || c.StreamsPerAddr < 0:
		return errors.New("the per-address connection limits must not be negative (0 disables the connection and idle-connection limits)")
	case c.Conns.HeaderTimeout < 0 || c.Conns.IdleTimeout < 0:
		return errors.New("the header and idle timeouts must not be negative (e.g. 10s, 2m)")
	case c.ArchiveDir != "" && (c.Archive.MaxBlob <= 0 || c.Archive.PerClaim <= 0):
		return errors.New("--archive-max-blob and --archive-per-claim must be positive byte counts (e.g. 1073741824)")
	}
	if _, err := witnesses(c.Witnesses); err != nil {
		return err
	}
	_, err := trustedProxies(c.TrustedProxies)
	return err
}

// witnesses parses the --witness values.
func witnesses(vals []string) ([]translog.Witness, error) {
	if len(vals) > translog.MaxWitnesses {
		return nil, fmt.Errorf("--witness: %d witnesses; at most %d", len(vals), translog.MaxWitnesses)
	}
	var out []translog.Witness
	seen := map[string]bool{}
	for _, v := range vals {
		w, err := translog.ParseWitness(v)
		if err != nil {
			return nil, err
		}
		if seen[w.Verifier.Key()] {
			return nil, fmt.Errorf("--witness %q: this witness key is given twice", v)
		}
		seen[w.Verifier.Key()] = true
		out = append(out, w)
	}
	return out, nil
}

// trustedProxies parses the trusted proxies: CIDRs or single addresses.
func trustedProxies(vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range vals {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q: give a CIDR (10.0.0.0/24) or an address (10.0.0.5)", v)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Run serves until ctx is cancelled, then drains (docs/deploy.md
// "Draining"): /healthz and /readyz answer 503 for cfg.DrainDelay while
// everything else is still served, then live event streams close with a
// retry hint, the listener closes, in-flight requests finish (for up to
// cfg.ShutdownTimeout), the settlement clock finishes its sweep and the
// database closes.
func Run(ctx context.Context, cfg Config) error {
	if cfg.SettleEvery <= 0 {
		return errors.New("server: SettleEvery must be positive")
	}
	if cfg.Clock == nil {
		cfg.Clock = dotlab.SystemClock{}
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	db, err := sqlstore.Open(ctx, cfg.DB, sqlstore.Options{Clock: cfg.Clock, Windows: cfg.Windows, LogOrigin: cfg.LogOrigin, UniqueNames: cfg.UniqueNames})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CheckVoteMode(ctx); err != nil {
		return err
	}
	api, err := handler(db, cfg)
	if err != nil {
		return err
	}
	o := &ops{db: db, dialect: string(db.Dialect()), logger: cfg.Logger, metrics: metrics.New(metrics.Config{Clock: cfg.Clock, Version: cfg.Version,
		Subscribers: api.Streams, DrawRoute: "GET /api/v1/jobs/next"})}
	ln, srv, err := listen(cfg, o.handler(api))
	if err != nil {
		return fmt.Errorf("listen address %s: %w", cfg.Addr, err)
	}
	w := cfg.Windows
	cfg.Logger.Info("dotlab serving", "addr", ln.Addr().String(), "db", db.Dialect(), "accept_window", w.Accept, "publish_window", w.Publish, "challenge_window", w.Challenge, "quorum", w.Quorum, "sealed_votes", w.Sealed)
	if cfg.Ready != nil {
		cfg.Ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	settleCtx, stopSettle := context.WithCancel(context.Background())
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		SettleLoop(settleCtx, cfg.Logger, observedSettler{protocol.New(protocol.Config{Store: db, Unscreened: true}), o.metrics}, cfg.SettleEvery, api.Notify)
	}()
	defer func() { stopSettle(); <-settled }()
	stopWitnesses, err := startWitnesses(db, cfg)
	if err != nil {
		return err
	}
	defer stopWitnesses()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return drain(cfg, srv, api, o)
}

// startWitnesses sends the log's checkpoints to cfg.Witnesses in the
// background (translog.Log.RunWitnesses) until the returned stop is called.
func startWitnesses(db *sqlstore.DB, cfg Config) (stop func(), err error) {
	ws, err := witnesses(cfg.Witnesses)
	if err != nil || len(ws) == 0 || db.Log() == nil {
		return func() {}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.Log().RunWitnesses(ctx, ws, translog.WitnessOptions{Every: cfg.WitnessEvery, Logger: cfg.Logger})
	}()
	cfg.Logger.Info("sending checkpoints to witnesses", "witnesses", len(ws))
	return func() { cancel(); <-done }, nil
}

// handler builds the /api/v1 handler with the public pages on db.
func handler(db *sqlstore.DB, cfg Config) (*httpapi.Server, error) {
	leaks, err := leakcheck.New()
	if err != nil {
		return nil, err
	}
	pages, err := web.New(web.Config{Store: db, Clock: cfg.Clock, Logger: cfg.Logger, Windows: cfg.Windows, Log: db.Log(), PublicURL: cfg.PublicURL})
	if err != nil {
		return nil, err
	}
	trusted, err := trustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	var archive protocol.InputArchive
	if cfg.ArchiveDir != "" {
		dir, err := inputarchive.OpenDir(cfg.ArchiveDir)
		if err != nil {
			return nil, fmt.Errorf("--archive-dir: %w", err)
		}
		archive = inputarchive.New(dir)
	}
	return httpapi.New(httpapi.Config{Store: db, Clock: cfg.Clock, Logger: cfg.Logger, Version: cfg.Version, Leaks: leaks, TrustedProxies: trusted, MaxStreamsPerAddr: streamsPerAddr(cfg.StreamsPerAddr), MessageQuota: cfg.Messages,
		AgentLimit: cfg.AgentLimit, AnonymousLimit: cfg.AnonymousLimit, AllowPrivateURLs: cfg.AllowPrivateURLs, Pages: pages, Log: db.Log(),
		Archive: archive, ArchiveLimits: cfg.Archive})
}

// drain takes the server out of rotation, then shuts it down: /healthz
// and /readyz answer 503 for cfg.DrainDelay (the balancer's checks see it
// while requests are still served), then the live streams close with a
// retry hint, the listener closes and in-flight requests finish within
// cfg.ShutdownTimeout.
func drain(cfg Config, srv *http.Server, api *httpapi.Server, o *ops) error {
	o.draining.Store(true)
	cfg.Logger.Info("draining: /healthz and /readyz answer 503", "drain_delay", cfg.DrainDelay, "shutdown_timeout", cfg.ShutdownTimeout)
	if cfg.DrainDelay > 0 {
		time.Sleep(cfg.DrainDelay)
	}
	cfg.Logger.Info("shutting down: closing live streams and the listener, finishing in-flight requests", "streams", api.Streams())
	api.Close()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("requests still in flight after the shutdown timeout of %s were cut off: %w", cfg.ShutdownTimeout, err)
	}
	cfg.Logger.Info("stopped cleanly")
	return nil
}
