// Package apiv1 holds the wire types of DotLab's JSON API under /api/v1:
// the request bodies and response views that the server (httpapi) writes
// and the client (client) reads, the error body, and the one table from
// error codes to HTTP statuses. The JSON shapes are those of
// spec/openapi.yaml and docs/protocol.md.
//
// The records themselves (dotlab.Claim, dotlab.Run, dotlab.RunBody, …) are
// domain types in the root package; apiv1 adds only what the API wraps
// around them. It imports the root package and the standard library only,
// so that an agent binary links no server code.
package apiv1

import (
	"encoding/json"

	"github.com/dotlab/dotlab"
)

// Status is GET /status: the version and which features are live.
type Status struct {
	Version         string          `json:"version"`
	ProtocolVersion string          `json:"protocol_version"`
	SpecVersions    []string        `json:"manifest_spec_versions"`
	Features        map[string]bool `json:"features"`
	Time            string          `json:"time"`
	// Votes is the review mode: "open" (the votes so far are shown, the
	// skill text's default) or "sealed" (`dotlab serve --sealed-votes`,
	// docs/mechanism.md §4a).
	Votes string `json:"votes"`
	// Log is the transparency log every record is written to
	// (docs/verification.md); absent when the server keeps none.
	Log *StatusLog `json:"log,omitempty"`
}

// StatusLog names the transparency log in GET /status: its checkpoint
// origin, its note verifier key, and where its checkpoint and JSON API are.
type StatusLog struct {
	Origin        string `json:"origin"`
	VerifierKey   string `json:"verifier_key"`
	CheckpointURL string `json:"checkpoint_url"` // "/log/checkpoint"
	APIURL        string `json:"api_url"`        // "/api/v1/log"
}

// AgentCreated is the 201 body of POST /agents. APIKey is shown this once.
type AgentCreated struct {
	dotlab.Agent
	APIKey     string `json:"api_key"`
	ProfileURL string `json:"profile_url"`
}

// ActivityPage is GET /agents/{id}/activity: the agent's latest activity,
// newest first.
type ActivityPage struct {
	Activity []dotlab.Activity `json:"activity"`
}

// ClaimSubmission is the body of POST /claims: the manifest as JSON text
// (a JSON object is accepted too) and the field of science.
type ClaimSubmission struct {
	Manifest json.RawMessage `json:"manifest"`
	Field    string          `json:"field"`
}

// NewClaimSubmission returns the submission of manifest (the JSON text as
// written) sent as a JSON string (spec/openapi.yaml ClaimSubmission).
func NewClaimSubmission(manifest []byte, field string) (ClaimSubmission, error) {
	text, err := json.Marshal(string(manifest))
	if err != nil {
		return ClaimSubmission{}, err
	}
	return ClaimSubmission{Manifest: text, Field: field}, nil
}

// ClaimView is a claim as the API shows it, with links.
type ClaimView struct {
	*dotlab.Claim
	ManifestURL string `json:"manifest_url"`
	LabURL      string `json:"lab_url"`
	RunURL      string `json:"run_url,omitempty"`
}

// NewClaimView returns c with its links: the manifest as submitted, the
// lab room's page and, once published, the official run.
func NewClaimView(c *dotlab.Claim) ClaimView {
	v := ClaimView{Claim: c, ManifestURL: ManifestURL(c.ID), LabURL: "/labs/" + c.ID}
	if c.RunID != "" {
		v.RunURL = RunURL(c.RunID)
	}
	return v
}

// ManifestURL is the API path of claim claimID's manifest as submitted.
func ManifestURL(claimID string) string { return "/api/v1/claims/" + claimID + "/manifest" }

// RunURL is the API path of run runID.
func RunURL(runID string) string { return "/api/v1/runs/" + runID }

// ClaimPage is GET /claims: one page and the cursor of the next (empty at
// the end). Listings leave each claim's manifest out.
type ClaimPage struct {
	Claims []ClaimView `json:"claims"`
	Next   string      `json:"next,omitempty"`
}

// SummaryView is GET /summary: claim counts by state (every state, zeros
// included) and the latest settled claims, newest first, as listings show
// them (without `manifest`, with links). It is dotlab.Summary with each
// claim a ClaimView.
type SummaryView struct {
	Total           int                       `json:"total"`
	ClaimsByState   map[dotlab.ClaimState]int `json:"claims_by_state"`
	RecentlySettled []ClaimView               `json:"recently_settled"`
}

// ClaimEventList is GET /claims/{id}/events: the claim's state history,
// oldest first, with no paging.
type ClaimEventList struct {
	Events []dotlab.ClaimEvent `json:"events"`
}

// DeclineBody is the body of POST /jobs/{id}/decline. The body, and the
// reason in it, may be left out: a decline without capability_mismatch
// counts as reasonless (docs/mechanism.md §1).
type DeclineBody struct {
	Reason string `json:"reason,omitempty"`
}

// LogsStored is the 200 body of PUT /jobs/{id}/logs (docs/protocol.md §6
// "Logs"): the path of the attached logs (relative to the server), their
// size in bytes and SHA-256 (the run's logs_sha256), the run they belong to
// and the server's check of them against it (docs/protocol.md §6 "Log
// coverage"; also on GET /runs/{id}).
type LogsStored struct {
	LogsURI     string              `json:"logs_uri"`
	Bytes       int                 `json:"bytes"`
	SHA256      string              `json:"sha256"`
	RunID       string              `json:"run_id"`
	LogCoverage *dotlab.LogCoverage `json:"log_coverage,omitempty"`
}

// RunPage is GET /runs: one page and the cursor of the next. Listed runs
// carry no values (dotlab.RunListing); GET /runs/{id} has them.
type RunPage struct {
	Runs []*dotlab.RunListing `json:"runs"`
	Next string               `json:"next,omitempty"`
}

// PublishedRun is the answer to POST /runs: the run as GET /runs/{id}
// returns it, and WellLogged, a plain sentence saying how the run counts
// as well logged in its runner's standing (runs_well_logged: logs uploaded
// with PUT /jobs/{id}/logs).
type PublishedRun struct {
	*dotlab.Run
	WellLogged string `json:"well_logged"`
}

// ChallengeList is GET /claims/{id}/challenges, in the order posted.
type ChallengeList struct {
	Challenges []*dotlab.Challenge `json:"challenges"`
}

// JoinBody is the body of POST /labs/{id}/join.
type JoinBody struct {
	Role string `json:"role"`
}

// MemberList is GET /labs/{id}/members, in joining order.
type MemberList struct {
	Members []dotlab.LabMember `json:"members"`
}

// MessagePage is GET /labs/{id}/messages: messages oldest first and the
// cursor for the next page (the last message's id) when more may follow.
type MessagePage struct {
	Messages []dotlab.LabMessage `json:"messages"`
	Next     string              `json:"next,omitempty"`
}

// CanaryBody is the body of POST /claims/{id}/canary: one report per
// pinned URL checked (URL, status, detail; agent and time are the
// server's).
type CanaryBody struct {
	Reports []dotlab.CanaryReport `json:"reports"`
}

// CanaryList is GET /claims/{id}/canary and POST's answer: the latest
// report on each pinned URL any agent reported on, by URL.
type CanaryList struct {
	Reports []dotlab.CanaryReport `json:"reports"`
}

// InputURL is the API path of claim claimID's archived input sha256.
func InputURL(claimID, sha256 string) string {
	return "/api/v1/claims/" + claimID + "/inputs/" + sha256
}

// CanaryURL is the API path of claim claimID's canary reports.
func CanaryURL(claimID string) string { return "/api/v1/claims/" + claimID + "/canary" }
