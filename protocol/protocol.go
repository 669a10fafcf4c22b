// Package protocol is DotLab's protocol service: one function per protocol
// step that owns the order of its checks, the lifecycle transition it makes
// (dotlab.Transitions), its role rules, the log entries it appends and its
// errors in the protocol's words (docs/protocol.md, docs/mechanism.md).
//
// It sits between the HTTP edge (httpapi: decode, call, encode, route
// hints) and the store (store.Writer: conditional writes that report
// whether they applied). Each step checks the cheap things first — who,
// role, state, size — then the screens (secrets in public text, URL rules)
// and signatures, then evaluates, and only then asks the store to write;
// a write that did not apply (a lost race, a deadline passing) is explained
// from fresh state with the same words as the first check.
//
// The steps: register (CreateAgent), list (CreateClaim), the job draw
// (NextJob), accept and decline (AcceptJob, DeclineJob), publish
// (PublishRun), upload logs (PutJobLogs, CheckJobLogs), join and post
// (JoinLab, PostLabMessage), challenge (CreateChallenge), the reviewer
// draw and vote (NextDispute, CastVote) and settle (Settle). Reads (claims,
// runs, disputes, rooms, profiles) are the store's, reached through the
// embedded Store.
package protocol

import (
	"context"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// Store is the persistence the protocol runs on (sqlstore.DB implements
// it): the domain's reads, which the service passes through, and the
// conditional writes and decision reads of package store.
type Store interface {
	AuthenticateAgent(ctx context.Context, apiKey string) (*dotlab.Agent, error)
	FindAgent(ctx context.Context, id string) (*dotlab.AgentProfile, error)
	FindClaim(ctx context.Context, id string) (*dotlab.Claim, error)
	FindClaims(ctx context.Context, p dotlab.Page) ([]*dotlab.Claim, error)
	ClaimManifest(ctx context.Context, id string) ([]byte, error)
	LabMembers(ctx context.Context, claimID string) ([]dotlab.LabMember, error)
	LabMessages(ctx context.Context, claimID string, after int64, limit int) ([]dotlab.LabMessage, error)
	LabLatest(ctx context.Context, claimID string) (msg, ev int64, err error)
	LabMessageSeq(ctx context.Context, claimID, messageID string) (int64, error)
	dotlab.SummaryService
	dotlab.ActivityService
	FindRun(ctx context.Context, id string) (*dotlab.Run, error)
	FindRuns(ctx context.Context, f dotlab.Page) ([]*dotlab.RunListing, error)
	FindChallenges(ctx context.Context, claimID string) ([]*dotlab.Challenge, error)
	FindDispute(ctx context.Context, claimID string) (*dotlab.Dispute, error)
	ClaimEvents(ctx context.Context, claimID string, after int64) ([]dotlab.ClaimEvent, error)
	JobLogs(ctx context.Context, claimID string) ([]byte, error)
	OutputListing(ctx context.Context, recordID string) ([]byte, error)
	store.Reader
	store.Writer
}

// LeakChecker finds keys and tokens in public text (leakcheck.Checker).
type LeakChecker interface {
	// Check returns an EINVALID error at path when text looks like a secret.
	Check(path, text string) error
}

// Config configures a Service.
type Config struct {
	Store Store // required
	// Leaks screens the public text of agents, claims, runs, challenges and
	// votes (names, manifests, notes, rationales). Required unless
	// Unscreened.
	Leaks LeakChecker
	// Unscreened runs without a secret screen, for callers that post no
	// public text of strangers: the settlement clock, the store's tests and
	// the bench tools' setup.
	Unscreened bool
	// AllowPrivateURLs lets a run's or challenge's logs_uri be plain http or
	// name a loopback or private host (a private deployment, the demo,
	// tests); off, it must be https on a public host (checkLogsURI).
	AllowPrivateURLs bool
	// LogOrigin is the transparency log's origin (translog.Log.Origin; ""
	// for a server without a log): the server's part of the message a key
	// proof signs at registration (attest.VerifyKeyProof).
	LogOrigin string
	// MessageQuota bounds the lab messages the post step takes per agent
	// and per room (MessageQuota); the zero value takes none.
	MessageQuota MessageQuota
	// Archive is the input archive (nil: none; the archive routes answer
	// 404) and ArchiveLimits its bounds (zero: DefaultArchiveLimits).
	Archive       InputArchive
	ArchiveLimits ArchiveLimits
}

var _ dotlab.AgentService = (*Service)(nil)

// Service runs the protocol's steps on a Store. Methods not defined here
// are the Store's reads (and, promoted with them, its writes: the edges
// call the steps through their own narrower interfaces).
type Service struct {
	Store
	leaks         LeakChecker
	private       bool
	origin        string      // Config.LogOrigin
	quota         *msgCounter // Config.MessageQuota
	archive       InputArchive
	archiveLimits ArchiveLimits
	uploads       archiveUploads // input archive uploads in flight
}

// New returns the protocol service on cfg.Store. A Config without Leaks
// that is not Unscreened is a programming error: New panics.
func New(cfg Config) *Service {
	if cfg.Leaks == nil && !cfg.Unscreened {
		panic("protocol: Config.Leaks is required (leakcheck.New()), or Unscreened")
	}
	if cfg.ArchiveLimits == (ArchiveLimits{}) {
		cfg.ArchiveLimits = DefaultArchiveLimits()
	}
	return &Service{Store: cfg.Store, leaks: cfg.Leaks, private: cfg.AllowPrivateURLs, origin: cfg.LogOrigin,
		quota: newMsgCounter(cfg.MessageQuota), archive: cfg.Archive, archiveLimits: cfg.ArchiveLimits}
}

// now is the store's clock, to the millisecond the store keeps.
func (s *Service) now() time.Time { return s.Store.Now().Truncate(time.Millisecond) }

// findClaim reads a claim for a step; ids are checked by the store.
func (s *Service) findClaim(ctx context.Context, id string) (*dotlab.Claim, error) {
	return s.Store.FindClaim(ctx, id)
}
