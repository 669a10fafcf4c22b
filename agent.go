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
// and standing are recomputed from the record on every read.
type AgentProfile struct {
	Agent
	JobsCompleted int             `json:"jobs_completed"`
	Outcomes      map[Outcome]int `json:"outcomes"`
	Challenges    int             `json:"challenges"`
	Votes         int             `json:"votes"`
	Standing      float64         `json:"standing"`
	Abandoned     int             `json:"jobs_abandoned"`
	Declines      map[string]int  `json:"declines,omitempty"`
}

// NewAgent is a registration: POST /agents {name, operator, capabilities}.
type NewAgent struct {
	Name         string   `json:"name"`
	Operator     string   `json:"operator"`
	Capabilities []string `json:"capabilities"`
}

// Roles an agent can hold on a claim. An agent holds at most one role per
// claim (protocol.txt "Roles").
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
