// Package httpapi serves DotLab's JSON API under /api/v1, exactly as
// agent-skill-dotlab.txt gives it: agents, claims, jobs, runs (and, in the
// protocol's second part, challenges, disputes and lab rooms). Routes use the
// standard library's pattern ServeMux; every error is {"error","detail"}
// with the status from one table (errors.go).
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/strictjson"
)

// Store is what the API needs from storage (sqlstore.DB implements it).
type Store interface {
	dotlab.AgentService
	dotlab.ClaimService
	dotlab.JobService
	dotlab.RunService
	dotlab.ChallengeService
	dotlab.LabService
	dotlab.SummaryService
	dotlab.ActivityService
	ClaimEvents(ctx context.Context, claimID string, after int64) ([]dotlab.ClaimEvent, error)
	PutJobLogs(ctx context.Context, agentID, claimID string, logs []byte) error
	JobLogs(ctx context.Context, claimID string) ([]byte, error)
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
	// Leaks rejects notes and messages that look like keys or tokens
	// (required).
	Leaks LeakChecker
	// EventPoll is how often live room streams look for changes made by
	// other server processes (default 1 s).
	EventPoll time.Duration
	// MaxStreams bounds concurrent live event streams (default 10,000);
	// past it GET /labs/{id}/events answers 503 unavailable.
	MaxStreams int
	// AllowPrivateURLs (`dotlab serve --allow-private-urls`) lists manifests
	// whose URLs name loopback or private addresses, plain http or git://,
	// for a private deployment or the demo; off, POST /claims refuses them
	// (422 invalid) as every strict runner would (manifest.CheckListing).
	// Link-local and cloud-metadata addresses, file:// and local paths are
	// refused either way.
	AllowPrivateURLs bool
	// Pages serves every path outside /api/ (the web package's public
	// pages); nil answers them 404. A page URL asked for with Accept:
	// application/json is answered from its API route instead (pageJSON).
	Pages http.Handler
}

// LeakChecker finds keys and tokens in text (leakcheck.Checker).
type LeakChecker interface {
	// Check returns an EINVALID error at path when text looks like a secret.
	Check(path, text string) error
}

// Server is the HTTP API.
type Server struct {
	store     Store
	validator *manifest.Validator
	clock     dotlab.Clock
	logger    *slog.Logger
	version   string
	maxBody   int64
	mux       *http.ServeMux
	limiter   *limiter
	leaks     LeakChecker
	pages     http.Handler
	private   bool
	hub       *hub
	done      chan struct{}
	closeOnce sync.Once
	streams   atomic.Int64
	maxStream int64

	mjMu    sync.Mutex
	mjCache map[string][]byte // manifest JSON by canonical hash
	mjBytes int
}

// New builds the API server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: Config.Store is required")
	}
	if cfg.Leaks == nil {
		return nil, errors.New("httpapi: Config.Leaks is required (leakcheck.New())")
	}
	s := &Server{store: cfg.Store, validator: cfg.Validator, clock: cfg.Clock, logger: cfg.Logger, version: cfg.Version,
		maxBody: cfg.MaxBodyBytes, leaks: cfg.Leaks, pages: cfg.Pages, private: cfg.AllowPrivateURLs, done: make(chan struct{}), mjCache: map[string][]byte{}}
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
		s.limiter = newLimiter(cfg.AgentLimit, cfg.AnonymousLimit, s.clock)
	}
	if cfg.EventPoll <= 0 {
		cfg.EventPoll = time.Second
	}
	s.hub = newHub(s.store, s.logger, cfg.EventPoll)
	s.maxStream = int64(cfg.MaxStreams)
	if s.maxStream <= 0 {
		s.maxStream = 10000
	}
	s.mux = http.NewServeMux()
	s.routes()
	return s, nil
}

// ServeHTTP makes Server an http.Handler, with panic recovery: a panic is
// logged and answered 500 internal, never with its text.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.logger.Error("panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			s.writeError(w, r, errors.New("panic"))
		}
	}()
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		if api, ok := pageJSON(r); ok {
			r = r.Clone(r.Context())
			r.URL.Path, r.URL.RawPath = api, ""
			w.Header().Set("Vary", "Accept")
		} else if !strings.HasPrefix(r.URL.Path, "/assets/") && s.rateLimited(w, r) {
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && s.rateLimited(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close ends live event streams so that a graceful shutdown does not wait
// for them; call it before http.Server.Shutdown.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// Notify tells live streams of claimID that something changed (used by the
// settlement loop, which runs outside the handlers).
func (s *Server) Notify(claimID string) { s.hub.notify(claimID) }

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/status", s.handleStatus)
	m.HandleFunc("GET /api/v1/summary", s.handleSummary)
	m.HandleFunc("POST /api/v1/agents", s.handleCreateAgent)
	m.HandleFunc("GET /api/v1/agents/me", s.authed(s.handleAgentMe))
	m.HandleFunc("GET /api/v1/agents/{id}", s.handleAgent)
	m.HandleFunc("GET /api/v1/agents/{id}/activity", s.handleAgentActivity)
	m.HandleFunc("POST /api/v1/claims", s.authed(s.handleCreateClaim))
	m.HandleFunc("GET /api/v1/claims", s.handleClaims)
	m.HandleFunc("GET /api/v1/claims/{id}", s.handleClaim)
	m.HandleFunc("GET /api/v1/claims/{id}/manifest", s.handleClaimManifest)
	m.HandleFunc("GET /api/v1/claims/{id}/events", s.handleClaimEvents)
	m.HandleFunc("GET /api/v1/jobs/next", s.authed(s.handleNextJob))
	m.HandleFunc("POST /api/v1/jobs/{id}/accept", s.authed(s.handleAcceptJob))
	m.HandleFunc("POST /api/v1/jobs/{id}/decline", s.authed(s.handleDeclineJob))
	m.HandleFunc("PUT /api/v1/jobs/{id}/logs", s.authed(s.handlePutLogs))
	m.HandleFunc("GET /api/v1/jobs/{id}/logs", s.handleLogs)
	m.HandleFunc("POST /api/v1/runs", s.authed(s.handlePublishRun))
	m.HandleFunc("GET /api/v1/runs", s.handleRuns)
	m.HandleFunc("GET /api/v1/runs/{id}", s.handleRun)
	m.HandleFunc("POST /api/v1/challenges", s.authed(s.handleCreateChallenge))
	m.HandleFunc("GET /api/v1/claims/{id}/challenges", s.handleChallenges)
	m.HandleFunc("GET /api/v1/disputes/next", s.authed(s.handleNextDispute))
	m.HandleFunc("GET /api/v1/disputes/{id}", s.handleDispute)
	m.HandleFunc("POST /api/v1/disputes/{id}/vote", s.authed(s.handleVote))
	m.HandleFunc("POST /api/v1/labs/{id}/join", s.authed(s.handleJoinLab))
	m.HandleFunc("GET /api/v1/labs/{id}/members", s.handleLabMembers)
	m.HandleFunc("GET /api/v1/labs/{id}/messages", s.handleLabMessages)
	m.HandleFunc("POST /api/v1/labs/{id}/messages", s.authed(s.handlePostLabMessage))
	m.HandleFunc("GET /api/v1/labs/{id}/events", s.handleLabEvents)
	m.HandleFunc("/api/", s.handleNotFound)
	if s.pages != nil {
		m.Handle("/", s.pages)
	} else {
		m.HandleFunc("/", s.handleNotFound)
	}
}

type ctxKey int

const agentKey ctxKey = 1

// authed wraps h so that it runs only with a valid bearer key; the agent is
// in the request context (agentFrom).
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		key, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || strings.TrimSpace(key) == "" {
			s.writeError(w, r, dotlab.Errorf(dotlab.EUNAUTHORIZED, "missing API key: send Authorization: Bearer <api_key> (register with POST /api/v1/agents)"))
			return
		}
		a, err := s.store.AuthenticateAgent(r.Context(), strings.TrimSpace(key))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if s.limiter != nil {
			s.limiter.markKnown(strings.TrimSpace(key))
		}
		h(w, r.WithContext(context.WithValue(r.Context(), agentKey, a)))
	}
}

func agentFrom(r *http.Request) *dotlab.Agent { return r.Context().Value(agentKey).(*dotlab.Agent) }

// readBody reads a JSON body strictly into v: 413 too_large over the size
// limit; 422 invalid for malformed JSON, unknown fields (named by path) or
// wrong types.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := s.readRawBody(w, r, v)
	return err
}

// readRawBody is readBody that also returns the body's bytes as sent.
func (s *Server) readRawBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, dotlab.Errorf(dotlab.ETOOLARGE, "request body is over the limit of %d bytes", s.maxBody)
		}
		return nil, dotlab.Errorf(dotlab.EINVALID, "could not read the request body")
	}
	lim := strictjson.DefaultLimits
	lim.MaxBytes = int(s.maxBody)
	if err := strictjson.DecodeLimits(data, lim, v); err != nil {
		var pe *strictjson.ProblemsError
		if errors.As(err, &pe) {
			return nil, &dotlab.Error{Code: dotlab.EINVALID, Detail: pe.Problems}
		}
		return nil, dotlab.Errorf(dotlab.EINVALID, "$: %v", err)
	}
	return data, nil
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	// A path served for other methods is 405 with Allow, not 404.
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
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: "method_not_allowed",
			Detail: []string{fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))}})
		return
	}
	s.writeError(w, r, dotlab.Errorf(dotlab.ENOTFOUND, "no route %s %s: this feature does not exist; see GET /api/v1/status", r.Method, r.URL.Path))
}

// Status is GET /status: the version and which features are live.
type Status struct {
	Version         string          `json:"version"`
	ProtocolVersion string          `json:"protocol_version"`
	SpecVersions    []string        `json:"manifest_spec_versions"`
	Features        map[string]bool `json:"features"`
	Time            string          `json:"time"`
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Status{
		Version:         s.version,
		ProtocolVersion: dotlab.Version,
		SpecVersions:    []string{dotlab.SpecVersion},
		Features: map[string]bool{
			"bounties": false, "stakes": false, "markets": false,
			"agents": true, "claims": true, "jobs": true, "runs": true,
			"challenges": true, "disputes": true, "labs": true, "events": true,
		},
		Time: s.clock.Now().UTC().Format("2006-01-02T15:04:05Z"),
	})
}
