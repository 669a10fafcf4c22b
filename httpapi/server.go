// Package httpapi serves DotLab's JSON API under /api/v1, as docs/protocol.md
// and spec/openapi.yaml give it: agents, claims, jobs, runs, challenges,
// disputes and lab rooms, one file per resource. Routes use the standard
// library's pattern ServeMux. Handlers return their error and one adapter
// (errors.go) writes it as {"error","detail"} with the status from the one
// table, apiv1.ErrorStatus; the wire types are package apiv1's.
package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/bytecache"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/translog"
)

// errPanic stands for a recovered panic: answered 500 internal, its text
// only logged.
var errPanic = errors.New("panic")

// Store is the persistence the API serves the protocol on (sqlstore.DB
// implements it): New wraps it in the protocol service (package protocol),
// which the handlers call.
type Store = protocol.Store

// MessageQuota bounds lab messages per agent and per room (the post
// step's protocol.MessageQuota).
type MessageQuota = protocol.MessageQuota

// DefaultMessageQuota is protocol.DefaultMessageQuota: 120 messages an
// hour per agent, 600 per room.
func DefaultMessageQuota() MessageQuota { return protocol.DefaultMessageQuota() }

// service is what the handlers call: the protocol's steps and reads
// (*protocol.Service).
type service interface {
	dotlab.AgentService
	dotlab.ClaimService
	dotlab.JobService
	dotlab.RunService
	dotlab.ChallengeService
	dotlab.LabService
	dotlab.SummaryService
	dotlab.ActivityService
	ClaimEvents(ctx context.Context, claimID string, after int64) ([]dotlab.ClaimEvent, error)
	PutJobLogs(ctx context.Context, agentID, claimID string, logs []byte) (*dotlab.Run, error)
	CheckJobLogs(ctx context.Context, agentID, claimID, sha256 string) (*dotlab.Run, error)
	JobLogs(ctx context.Context, claimID string) ([]byte, error)
	MayPutOutputListing(ctx context.Context, agentID, claimID string) error
	MayPublishRun(ctx context.Context, agentID, claimID string) error
	PutOutputListing(ctx context.Context, agentID, claimID string, data []byte) (*dotlab.OutputListing, error)
	OutputListing(ctx context.Context, recordID string) ([]byte, error)
	CheckPutInput(ctx context.Context, agentID, claimID, sha256 string, size int64) error
	PutInput(ctx context.Context, agentID, claimID, sha256 string, size int64, body io.Reader) (*dotlab.ArchivedInput, error)
	Input(ctx context.Context, agentID, claimID, sha256 string) (io.ReadCloser, int64, error)
	ReportCanary(ctx context.Context, agentID, claimID string, reports []dotlab.CanaryReport) ([]dotlab.CanaryReport, error)
	LatestCanaryReports(ctx context.Context, claimID string) ([]dotlab.CanaryReport, error)
	Windows() dotlab.Windows
}

// Config configures a Server.
type Config struct {
	Store     Store
	Validator *manifest.Validator
	Clock     dotlab.Clock
	Logger    *slog.Logger
	Version   string
	// MaxBodyBytes bounds request bodies (default 1 MiB); larger bodies get
	// 413 too_large.
	MaxBodyBytes int64
	// AgentLimit and AnonymousLimit rate-limit requests per API key and per
	// client address (429 with Retry-After); zero values disable them.
	AgentLimit, AnonymousLimit RateLimit
	// TrustedProxies are the balancers in front of the server: a request
	// from one of them is limited by the client address its
	// X-Forwarded-For names (clientAddr); none: by the peer's address.
	TrustedProxies []netip.Prefix
	// Leaks rejects notes and messages that look like keys or tokens
	// (required).
	Leaks LeakChecker
	// Notifier announces every committed change of the store, by any
	// server process sharing it (docs/protocol.md §9 "Delivery"): live room
	// streams are woken by it and the read cache is invalidated by it. Nil:
	// the Store, when it implements Notifier (sqlstore.DB does); with none,
	// streams are woken by this process's handlers and the poll, and
	// nothing is cached.
	Notifier Notifier
	// ReadCache bounds the read cache of GET /claims/{id}, its manifest and
	// settled runs (entries; default 10,000; negative: no cache). Used only
	// with a Notifier.
	ReadCache int
	// EventPoll is the fallback poll of live room streams, which recovers
	// a change whose announcement was missed (default 10 s with a
	// Notifier, 1 s without one: then it is how changes made by other
	// server processes arrive).
	EventPoll time.Duration
	// MaxStreams bounds concurrent live event streams (default 10,000);
	// past it GET /labs/{id}/events answers 503 unavailable.
	MaxStreams int
	// MaxStreamsPerAddr bounds the live event streams one client address
	// holds at once (clientAddr: behind a trusted proxy, the forwarded
	// client; 0: DefaultStreamsPerAddr, negative: no limit); past it the
	// stream is refused with 429 rate_limited.
	MaxStreamsPerAddr int
	// MessageQuota bounds lab messages per agent and per room (429
	// rate_limited naming the quota and its reset); the zero value takes
	// DefaultMessageQuota, a negative PerAgent or PerRoom disables it.
	MessageQuota MessageQuota
	// AllowPrivateURLs (`dotlab serve --allow-private-urls`) lists manifests
	// whose URLs name loopback or private addresses, plain http or git://,
	// for a private deployment or the demo; off, POST /claims refuses them
	// (422 invalid) as every strict runner would (manifest.CheckListing).
	// It also lets a run's or challenge's logs_uri be plain http or name
	// such a host (protocol.Config.AllowPrivateURLs); off, logs_uri must be https on a public
	// host. Link-local and cloud-metadata addresses, file:// and local
	// paths are refused either way.
	AllowPrivateURLs bool
	// Pages serves every path outside /api/ (the web package's public
	// pages); nil answers them 404. A page URL asked for with Accept:
	// application/json is answered from the API route its page table
	// names instead (pageJSON).
	Pages Pages
	// Log is the transparency log whose API and tiles the server serves
	// (logRoutes); nil serves neither.
	Log *translog.Log
	// Archive is the input archive (`dotlab serve --archive-dir`; nil:
	// none, its routes answer 404) and ArchiveLimits its bounds (zero:
	// protocol.DefaultArchiveLimits).
	Archive       protocol.InputArchive
	ArchiveLimits protocol.ArchiveLimits
}

// Pages are the public pages (web.Handler): they serve every path outside
// /api/ and own their page table, which names the API route holding each
// page's data.
type Pages interface {
	http.Handler
	APIRoute(path string) (api string, ok bool)
}

// Notifier delivers the store's change announcements (sqlstore.DB
// implements it; docs/protocol.md §9 "Delivery").
type Notifier interface {
	// Subscribe calls fn with each committed change: this process's right
	// after commit, other processes' as their notification arrives, and
	// the zero dotlab.Change (a resync: re-read everything) when
	// announcements may have been missed. fn must not block. The returned
	// function unsubscribes.
	Subscribe(fn func(dotlab.Change)) (cancel func())
	// Listening reports whether every process's changes are being
	// delivered now; while it is false nothing is served from the cache.
	Listening() bool
}

// LeakChecker finds keys and tokens in text (leakcheck.Checker).
type LeakChecker interface {
	// Check returns an EINVALID error at path when text looks like a secret.
	Check(path, text string) error
}

// Server is the HTTP API.
type Server struct {
	store     service
	validator *manifest.Validator
	clock     dotlab.Clock
	logger    *slog.Logger
	version   string
	maxBody   int64
	mux       *http.ServeMux
	limiter   *limiter
	leaks     LeakChecker
	pages     Pages
	private   bool
	hub       *hub
	notifier  Notifier
	cache     *readCache // nil: no cache (no Notifier, or Config.ReadCache < 0)
	unsub     func()
	done      chan struct{}
	closeOnce sync.Once
	streams   atomic.Int64
	maxStream int64
	// addrStreams counts live streams per client address.
	addrStreams *streamCounter
	msgQuota    MessageQuota   // Config.MessageQuota, for Retry-After
	trusted     []netip.Prefix // Config.TrustedProxies

	manifests *bytecache.Cache[[]byte] // manifest JSON by canonical hash
	listings  listingBounds            // output listings read and served at once
	routeList []Route                  // the API routes, as registered (Routes)
	log       *translog.Log
}

// New builds the API server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: Config.Store is required")
	}
	if cfg.Leaks == nil {
		return nil, errors.New("httpapi: Config.Leaks is required (leakcheck.New())")
	}
	if cfg.MessageQuota == (MessageQuota{}) {
		cfg.MessageQuota = DefaultMessageQuota()
	}
	origin := ""
	if cfg.Log != nil {
		origin = cfg.Log.Origin()
	}
	svc := protocol.New(protocol.Config{Store: cfg.Store, Leaks: cfg.Leaks, AllowPrivateURLs: cfg.AllowPrivateURLs,
		LogOrigin: origin, MessageQuota: cfg.MessageQuota, Archive: cfg.Archive, ArchiveLimits: cfg.ArchiveLimits})
	s := &Server{store: svc, validator: cfg.Validator, clock: cfg.Clock, logger: cfg.Logger, version: cfg.Version,
		maxBody: cfg.MaxBodyBytes, leaks: cfg.Leaks, pages: cfg.Pages, private: cfg.AllowPrivateURLs, done: make(chan struct{}), manifests: bytecache.New[[]byte](maxManifestJSONBytes), log: cfg.Log,
		listings: newListingBounds()}
	if s.validator == nil {
		v, err := manifest.NewValidator()
		if err != nil {
			return nil, err
		}
		s.validator = v
	}
	if s.clock == nil {
		s.clock = dotlab.SystemClock{}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.maxBody == 0 {
		s.maxBody = 1 << 20
	}
	if cfg.AgentLimit.PerSecond > 0 || cfg.AnonymousLimit.PerSecond > 0 {
		s.limiter = newLimiter(cfg.AgentLimit, cfg.AnonymousLimit, cfg.TrustedProxies, s.clock)
	}
	s.notifier = cfg.Notifier
	if n, ok := cfg.Store.(Notifier); ok && s.notifier == nil {
		s.notifier = n
	}
	if cfg.EventPoll <= 0 {
		cfg.EventPoll = time.Second
		if s.notifier != nil {
			cfg.EventPoll = 10 * time.Second
		}
	}
	s.hub = newHub(s.store, s.logger, cfg.EventPoll)
	if s.notifier != nil {
		if cfg.ReadCache == 0 {
			cfg.ReadCache = defaultReadCache
		}
		if cfg.ReadCache > 0 {
			s.cache = newReadCache(cfg.ReadCache, s.notifier.Listening)
		}
		s.unsub = s.notifier.Subscribe(s.changed)
	}
	s.maxStream = int64(cfg.MaxStreams)
	s.addrStreams = newStreamCounter(cfg.MaxStreamsPerAddr)
	s.msgQuota = cfg.MessageQuota
	s.trusted = cfg.TrustedProxies
	if s.maxStream <= 0 {
		s.maxStream = 10000
	}
	s.mux = http.NewServeMux()
	s.routes()
	return s, nil
}

// ServeHTTP makes Server an http.Handler: the middleware (serve) and the
// routes, with every error written by the one adapter.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handle(s.serve)(w, r) }

// serve is the middleware around the routes: panic recovery (a panic is
// logged and answered 500 internal, never with its text), a page URL asked
// for as JSON answered from its API route (pageJSON), and rate limits on
// the API and the pages (not on /assets/).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.logger.Error("panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			err = errPanic
		}
	}()
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		if api, ok := s.pageJSON(r); ok {
			r = r.Clone(r.Context())
			r.URL.Path, r.URL.RawPath = api, ""
			w.Header().Set("Vary", "Accept")
		}
	}
	if strings.HasPrefix(r.URL.Path, "/api/") || !strings.HasPrefix(r.URL.Path, "/assets/") {
		if answered, err := s.rateLimit(w, r); answered || err != nil {
			return err
		}
	}
	s.mux.ServeHTTP(w, r)
	return nil
}

// Close ends live event streams so that a graceful shutdown does not wait
// for them; call it before http.Server.Shutdown.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.unsub != nil {
			s.unsub()
		}
		close(s.done)
	})
}

// Notify tells live streams of claimID that something changed (used by the
// settlement loop, which runs outside the handlers). With a Notifier it
// does nothing: the store announced the change already.
func (s *Server) Notify(claimID string) { s.wake(claimID) }

// wake wakes the live streams of claimID after a write by this process's
// handlers, when there is no Notifier to do it.
func (s *Server) wake(claimID string) {
	if s.notifier == nil {
		s.hub.notify(claimID, wantAll, 0)
	}
}

// changed applies one announced change: the claim's cache entries go
// (unless only its room changed) and its live streams fetch what is new;
// a resync empties the cache and wakes every room.
func (s *Server) changed(ch dotlab.Change) {
	if ch.Resync() {
		s.cache.reset()
		s.hub.notifyAll()
		s.logger.Info("live events: announcements may have been missed; every room re-reads the store", "listening", s.notifier.Listening())
		return
	}
	if ch.Room {
		s.hub.notify(ch.ClaimID, wantMsgs, ch.MessageSeq)
		return
	}
	s.cache.invalidate(ch.ClaimID)
	s.hub.notify(ch.ClaimID, wantAll, 0)
}

// Route is one API route the server serves: its method, its path under
// /api/v1 (with {id} wildcards) and whether it needs an API key. Every
// route is one operation of spec/openapi.yaml (spec/openapi_test.go checks
// both ways).
type Route struct {
	Method, Path string
	Key          bool
}

// Routes returns the API routes, in the order they are registered.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routeList...) }

func (s *Server) routes() {
	reg := func(pattern string, h handlerFunc, key bool) {
		s.mux.HandleFunc(pattern, s.handle(h))
		if method, path, ok := strings.Cut(pattern, " /api/v1"); ok {
			s.routeList = append(s.routeList, Route{Method: method, Path: path, Key: key})
		}
	}
	api := func(pattern string, h handlerFunc) { reg(pattern, h, false) }
	key := func(pattern string, h handlerFunc) { reg(pattern, s.authed(h), true) }
	api("GET /api/v1/status", s.handleStatus)
	api("GET /api/v1/summary", s.handleSummary)
	api("POST /api/v1/agents", s.handleCreateAgent)
	key("GET /api/v1/agents/me", s.handleAgentMe)
	api("GET /api/v1/agents/{id}", s.handleAgent)
	api("GET /api/v1/agents/{id}/activity", s.handleAgentActivity)
	key("POST /api/v1/claims", s.handleCreateClaim)
	api("GET /api/v1/claims", s.handleClaims)
	api("GET /api/v1/claims/{id}", s.handleClaim)
	api("GET /api/v1/claims/{id}/manifest", s.handleClaimManifest)
	api("GET /api/v1/claims/{id}/events", s.handleClaimEvents)
	key("PUT /api/v1/claims/{id}/inputs/{sha256}", s.handlePutInput)
	key("GET /api/v1/claims/{id}/inputs/{sha256}", s.handleInput)
	key("POST /api/v1/claims/{id}/canary", s.handleReportCanary)
	api("GET /api/v1/claims/{id}/canary", s.handleCanary)
	key("GET /api/v1/jobs/next", s.handleNextJob)
	key("POST /api/v1/jobs/{id}/accept", s.handleAcceptJob)
	key("POST /api/v1/jobs/{id}/decline", s.handleDeclineJob)
	key("PUT /api/v1/jobs/{id}/logs", s.handlePutLogs)
	api("GET /api/v1/jobs/{id}/logs", s.handleLogs)
	key("PUT /api/v1/jobs/{id}/outputs", s.handlePutOutputs)
	api("GET /api/v1/runs/{id}/outputs", s.handleOutputs)
	api("GET /api/v1/challenges/{id}/outputs", s.handleOutputs)
	key("POST /api/v1/runs", s.handlePublishRun)
	api("GET /api/v1/runs", s.handleRuns)
	api("GET /api/v1/runs/{id}", s.handleRun)
	key("POST /api/v1/challenges", s.handleCreateChallenge)
	api("GET /api/v1/claims/{id}/challenges", s.handleChallenges)
	key("GET /api/v1/disputes/next", s.handleNextDispute)
	api("GET /api/v1/disputes/{id}", s.handleDispute)
	key("POST /api/v1/disputes/{id}/vote", s.handleVote)
	key("POST /api/v1/disputes/{id}/commit", s.handleCommit)
	key("POST /api/v1/disputes/{id}/reveal", s.handleReveal)
	key("POST /api/v1/labs/{id}/join", s.handleJoinLab)
	api("GET /api/v1/labs/{id}/members", s.handleLabMembers)
	api("GET /api/v1/labs/{id}/messages", s.handleLabMessages)
	key("POST /api/v1/labs/{id}/messages", s.handlePostLabMessage)
	api("GET /api/v1/labs/{id}/events", s.handleLabEvents)
	s.logRoutes(api)
	api("/api/", s.handleNotFound)
	if s.pages != nil {
		s.mux.Handle("/", s.pages)
	} else {
		api("/", s.handleNotFound)
	}
}

type ctxKey int

const agentKey ctxKey = 1

// authed wraps h so that it runs only with a valid bearer key; the agent is
// in the request context (agentFrom).
func (s *Server) authed(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		key, ok := bearerKey(r)
		if !ok {
			return dotlab.Errorf(dotlab.EUNAUTHORIZED, "missing API key: send Authorization: Bearer <api_key> (register with POST /api/v1/agents)")
		}
		a, err := s.store.AuthenticateAgent(r.Context(), key)
		if err != nil {
			return err
		}
		if s.limiter != nil {
			s.limiter.markKnown(key)
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), agentKey, a)))
	}
}

// optionalAgent is the agent of r's bearer key on a public route, when
// the key is valid; ok is false without one (no refusal: the route is
// served to everyone).
func (s *Server) optionalAgent(r *http.Request) (a *dotlab.Agent, ok bool) {
	key, ok := bearerKey(r)
	if !ok {
		return nil, false
	}
	a, err := s.store.AuthenticateAgent(r.Context(), key)
	return a, err == nil
}

// bearerKey is the key of r's "Authorization: Bearer <key>" header, the
// scheme's name in any letter case (RFC 7235 §2.1: "case-insensitive"),
// white space around the key trimmed; ok is false when there is none.
func bearerKey(r *http.Request) (key string, ok bool) {
	scheme, key, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

func agentFrom(r *http.Request) *dotlab.Agent { return r.Context().Value(agentKey).(*dotlab.Agent) }

// handleNotFound answers every path no route serves: 405
// method_not_allowed with Allow when the path is served for other methods,
// else 404 no_such_route (docs/protocol.md §1).
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/api/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return dotlab.Errorf(apiv1.EMETHODNOTALLOWED, "%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))
	}
	if route, ok := s.nearRoute(r.Method, r.URL.Path); ok {
		return dotlab.Errorf(dotlab.ENOSUCHROUTE, "%s %s: this route does not exist as written, but the route is %s: paths have no trailing slash and their fixed parts are lower case; the feature is there, send the request to that route", r.Method, r.URL.Path, route)
	}
	return noSuchRoute(r.Method, r.URL.Path)
}

// nearRoute finds the API route that path spells only differently: with
// trailing slashes, or with its fixed segments in another letter case
// (/api/v1/claims/, /api/v1/Claims/DL-0001/Manifest). It returns the
// route as "METHOD PATH", ids kept as sent, preferring one served for
// method; ok is false when there is none.
func (s *Server) nearRoute(method, path string) (string, bool) {
	segs := strings.Split(strings.TrimRight(path, "/"), "/")
	found := ""
	for _, rt := range s.routeList {
		rsegs := strings.Split("/api/v1"+rt.Path, "/")
		if len(rsegs) != len(segs) {
			continue
		}
		fixed := make([]string, len(segs))
		for i, seg := range rsegs {
			switch {
			case strings.HasPrefix(seg, "{") && segs[i] != "":
				fixed[i] = segs[i]
			case strings.EqualFold(seg, segs[i]):
				fixed[i] = seg
			default:
				fixed = nil
			}
			if fixed == nil {
				break
			}
		}
		if fixed == nil || strings.Join(fixed, "/") == path {
			continue
		}
		if cand := rt.Method + " " + strings.Join(fixed, "/"); rt.Method == method {
			return cand, true
		} else if found == "" {
			found = cand
		}
	}
	return found, found != ""
}

// noSuchRoute is the 404 of a route the API does not have: a feature that
// does not exist (no_such_route), as distinct from a record that does not
// exist (not_found; docs/protocol.md §1 and §5).
func noSuchRoute(method, path string) error {
	if !strings.HasPrefix(path, "/api/v1/") {
		return dotlab.Errorf(dotlab.ENOSUCHROUTE, "%s %s: this route does not exist: DotLab's API is v1, under /api/v1; see GET /api/v1/status for the live features and /docs/protocol for every route", method, path)
	}
	return dotlab.Errorf(dotlab.ENOSUCHROUTE, "%s %s: this route does not exist in DotLab's API v1, so the feature is not there; see GET /api/v1/status for the live features and /docs/protocol for every route", method, path)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	s.writeJSON(w, http.StatusOK, apiv1.Status{
		Version:         s.version,
		ProtocolVersion: dotlab.Version,
		SpecVersions:    dotlab.SpecVersions(),
		Features: map[string]bool{
			"bounties": false, "stakes": false, "markets": false,
			"agents": true, "claims": true, "jobs": true, "runs": true,
			"challenges": true, "disputes": true, "labs": true, "events": true, "log": s.log != nil,
			"bound_signatures": s.log != nil, // v2 statements naming the log origin and agent id (docs/verification.md §7)
		},
		Time:  s.clock.Now().UTC().Format("2006-01-02T15:04:05Z"),
		Votes: voteMode(s.store.Windows()),
		Log:   s.statusLog(),
	})
	return nil
}
