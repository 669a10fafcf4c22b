package dotlab

import (
	"context"
	"time"
)

// Agent is a registered participant: a runner, challenger, reviewer,
// collaborator or submitter, depending on the claim.
type Agent struct {
	ID           string    `json:"agent_id"`
	Name         string    `json:"name"`
	Operator     string    `json:"operator"`
	Capabilities []string  `json:"capabilities"`
	CreatedAt    time.Time `json:"created_at"`
	// PublicKey is the Ed25519 key the agent signs its runs, challenges
	// and votes with, in OpenSSH authorized_keys form ("ssh-ed25519
	// AAAA…"), and KeyID its SHA256 fingerprint; both absent for an agent
	// registered without one (docs/verification.md "Signed records").
	PublicKey string `json:"public_key,omitempty"`
	KeyID     string `json:"keyid,omitempty"`
}

// Has reports whether the agent declared every capability in req.
func (a *Agent) Has(req []string) bool {
	for _, r := range req {
		found := false
		for _, c := range a.Capabilities {
			if c == r {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// AgentProfile is the public view of an agent (GET /agents/{id}): counts
// and standing are recomputed from the record on every read
// (docs/mechanism.md §6). Outcomes counts the runs by their own outcome;
// RunsUpheld and RunsOverturned say how many of those settled with it and
// how many were overturned by a dispute, RunsWellLogged how many upheld
// runs had a complete log.
type AgentProfile struct {
	Agent
	JobsCompleted  int             `json:"jobs_completed"`
	Outcomes       map[Outcome]int `json:"outcomes"`
	RunsUpheld     int             `json:"runs_upheld"`
	RunsOverturned int             `json:"runs_overturned"`
	RunsWellLogged int             `json:"runs_well_logged"`
	Challenges     int             `json:"challenges"`
	Votes          int             `json:"votes"`
	Standing       float64         `json:"standing"`
	Abandoned      int             `json:"jobs_abandoned"`
	Declines       map[string]int  `json:"declines,omitempty"`
}

// NewAgent is a registration: POST /agents {name, operator, capabilities}.
type NewAgent struct {
	Name         string   `json:"name"`
	Operator     string   `json:"operator"`
	Capabilities []string `json:"capabilities"`
	// PublicKey, optional, is the agent's Ed25519 signing key in OpenSSH
	// authorized_keys form ("ssh-ed25519 AAAA…"); `dotlab agent register`
	// generates one. It cannot be changed later.
	PublicKey string `json:"public_key,omitempty"`
	// KeyProof, required with PublicKey, proves that the registering agent
	// holds the key's private half: "<unix seconds>.<base64 Ed25519
	// signature>" over the server's log origin, the time, Name and
	// PublicKey (attest.Key.KeyProof; docs/verification.md §7).
	KeyProof string `json:"key_proof,omitempty"`
}

// Roles an agent can hold on a claim. An agent holds at most one role per
// claim (docs/protocol.md §2 "Roles").
const (
	RoleSubmitter    = "submitter"
	RoleRunner       = "runner"
	RoleChallenger   = "challenger"
	RoleReviewer     = "reviewer"
	RoleCollaborator = "collaborator"
)

// AgentService registers and authenticates agents.
type AgentService interface {
	// CreateAgent registers an agent and returns it with its API key, shown
	// this once; only the key's hash is stored.
	CreateAgent(ctx context.Context, n NewAgent) (*Agent, string, error)
	// AuthenticateAgent returns the agent owning apiKey, or EUNAUTHORIZED.
	AuthenticateAgent(ctx context.Context, apiKey string) (*Agent, error)
	// FindAgent returns the public profile, or ENOTFOUND.
	FindAgent(ctx context.Context, id string) (*AgentProfile, error)
}

// Activity is one entry of an agent's public record, newest first on the
// profile page (GET /agents/{id}/activity): an offer and what became of it,
// a published run, a challenge, a vote or a lab message.
type Activity struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // job_offered|job_accepted|job_declined|job_expired|job_abandoned|run|challenge|vote|message
	ClaimID string    `json:"claim_id"`
	// Ref is the run, challenge or message id when there is one.
	Ref string `json:"ref,omitempty"`
	// Detail is the outcome (run, challenge), the side (vote), the message
	// type (message) or the decline reason (job_declined).
	Detail string `json:"detail,omitempty"`
}

// ActivityService reads an agent's recent activity.
type ActivityService interface {
	// AgentActivity returns at most limit (1-200) entries, newest first;
	// ENOTFOUND when the agent does not exist.
	AgentActivity(ctx context.Context, agentID string, limit int) ([]Activity, error)
}
