package dotlab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ClaimState is where a claim stands in its lifecycle (docs/protocol.md §3
// has the diagram; Transitions in lifecycle.go is the state machine):
//
//	listed → funded → assigned → running → published → challenge_window → settled
//	challenge_window → disputed → reviewed → settled
//	assigned/running → published → settled (spec_issue, input_mismatch)
//
// Bounties are not live, so a listed claim is funded at once. A declined or
// ignored offer or an abandoned job returns the claim to funded. listed,
// published and reviewed are recorded in the history but never stored.
type ClaimState string

// The claim states.
const (
	StateListed          ClaimState = "listed"
	StateFunded          ClaimState = "funded"
	StateAssigned        ClaimState = "assigned"
	StateRunning         ClaimState = "running"
	StatePublished       ClaimState = "published"
	StateChallengeWindow ClaimState = "challenge_window"
	StateDisputed        ClaimState = "disputed"
	StateReviewed        ClaimState = "reviewed"
	StateSettled         ClaimState = "settled"
)

// ClaimStates lists every state in lifecycle order.
var ClaimStates = []ClaimState{StateListed, StateFunded, StateAssigned, StateRunning, StatePublished,
	StateChallengeWindow, StateDisputed, StateReviewed, StateSettled}

// Valid reports whether s is a known state.
func (s ClaimState) Valid() bool {
	for _, v := range ClaimStates {
		if s == v {
			return true
		}
	}
	return false
}

// Claim is a listed published number with its pinned manifest.
type Claim struct {
	ID           string     `json:"id"` // DL-0001, …
	Title        string     `json:"title"`
	Field        string     `json:"field"`
	SubmitterID  string     `json:"submitter_id"`
	State        ClaimState `json:"state"`
	ManifestHash string     `json:"manifest_hash"`      // SHA-256 of the RFC 8785 canonical manifest, hex
	Manifest     *Manifest  `json:"manifest,omitempty"` // left out of listings
	CreatedAt    time.Time  `json:"created_at"`
	// RunnerID is the agent holding the job (offered, assigned or running) or
	// the runner of the official run.
	RunnerID          string     `json:"runner_id,omitempty"`
	OfferExpiresAt    *time.Time `json:"offer_expires_at,omitempty"`
	PublishDeadline   *time.Time `json:"publish_deadline,omitempty"`
	RunID             string     `json:"run_id,omitempty"`
	ChallengeDeadline *time.Time `json:"challenge_deadline,omitempty"`
	// Outcome is the final outcome once settled.
	Outcome   Outcome    `json:"outcome,omitempty"`
	SettledAt *time.Time `json:"settled_at,omitempty"`
}

var claimIDRE = lazyRegexp(`^DL-[0-9]{4,18}$`)

// ValidClaimID reports whether id has the form DL-0001.
func ValidClaimID(id string) bool { return claimIDRE().MatchString(id) }

// FormatClaimID renders the claim number n as DL-0001 (zero-padded to 4).
func FormatClaimID(n int64) string { return fmt.Sprintf("DL-%04d", n) }

// NewClaim is what a submitter lists: the manifest exactly as submitted (Raw),
// its parsed form, its canonical identity and the field of science.
type NewClaim struct {
	Raw          []byte
	Manifest     *Manifest
	ManifestHash string
	Field        string
}

// Page is one page of a listing in claim order (claims, runs;
// docs/protocol.md §10): State, when set, keeps only claims in that state;
// After is the last claim id of the previous page; Limit is 1-200
// (0: DefaultPageLimit).
type Page struct {
	State ClaimState
	After string
	Limit int
}

// DefaultPageLimit and MaxPageLimit bound a page.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
)

// Check returns p with its default limit and the claim number After names
// (0 for the first page), or EINVALID naming the query parameter: limit,
// stateParam (the listing's name for State: "state", "status") or after.
func (p Page) Check(stateParam string) (Page, int64, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	if p.Limit > MaxPageLimit {
		return p, 0, Errorf(EINVALID, "limit: at most %d per page", MaxPageLimit)
	}
	if p.State != "" && !p.State.Valid() {
		return p, 0, Errorf(EINVALID, "%s: %q is not a claim state (one of listed, funded, assigned, running, published, challenge_window, disputed, reviewed, settled)", stateParam, p.State)
	}
	if p.After == "" {
		return p, 0, nil
	}
	if !ValidClaimID(p.After) {
		return p, 0, Errorf(EINVALID, "after: %q is not a claim id like DL-0001", p.After)
	}
	return p, ClaimNumber(p.After), nil
}

// Next is the cursor of the page after one that listed n items, the last
// with claim id last: "" when the page was not full (the listing's end).
func (p Page) Next(n int, last string) string {
	if n < p.Limit || n == 0 {
		return ""
	}
	return last
}

// ClaimNumber is the number of a valid claim id (DL-0042 → 42).
func ClaimNumber(id string) int64 {
	var n int64
	for _, r := range strings.TrimPrefix(id, "DL-") {
		n = n*10 + int64(r-'0')
	}
	return n
}

// ClaimService lists and finds claims.
type ClaimService interface {
	// CreateClaim lists a claim for submitter; EDUPLICATE when the same
	// canonical manifest is listed already.
	CreateClaim(ctx context.Context, submitterID string, c NewClaim) (*Claim, error)
	// FindClaim returns the claim or ENOTFOUND.
	FindClaim(ctx context.Context, id string) (*Claim, error)
	// FindClaims returns one page of claims ordered by id.
	FindClaims(ctx context.Context, p Page) ([]*Claim, error)
	// ClaimManifest returns the manifest bytes exactly as submitted, or ENOTFOUND.
	ClaimManifest(ctx context.Context, id string) ([]byte, error)
}

// ClaimEvent is one state change in a claim's history (the lifecycle strip
// and the live events of a lab room).
type ClaimEvent struct {
	ClaimID string     `json:"claim_id"`
	Seq     int64      `json:"seq"`
	State   ClaimState `json:"state"`
	At      time.Time  `json:"at"`
	Detail  string     `json:"detail,omitempty"`
}

// Summary is the front page's data (GET /summary): how many claims stand in
// each state and the latest settled claims with their outcomes.
type Summary struct {
	Total           int                `json:"total"`
	ClaimsByState   map[ClaimState]int `json:"claims_by_state"`  // every state, zeros included
	RecentlySettled []*Claim           `json:"recently_settled"` // newest settled_at first, manifest left out
}

// SummaryService computes the front page's summary.
type SummaryService interface {
	// ClaimSummary counts claims by state and returns the recent (1-50)
	// latest settled claims.
	ClaimSummary(ctx context.Context, recent int) (*Summary, error)
}
