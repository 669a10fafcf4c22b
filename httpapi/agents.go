package httpapi

import (
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/attest"
)

// handleCreateAgent is POST /agents: the new agent and its key, shown once.
func (s *Server) handleCreateAgent(w http.ResponseWriter, r *http.Request) error {
	var n dotlab.NewAgent
	if err := s.readBodyAtMost(w, r, &n, maxAgentBody); err != nil {
		return err
	}
	if err := s.checkText(map[string]string{"$.name": n.Name, "$.operator": n.Operator}); err != nil {
		return err
	}
	if err := s.checkKeyProof(n); err != nil {
		return err
	}
	a, key, err := s.store.CreateAgent(r.Context(), n)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusCreated, apiv1.AgentCreated{Agent: *a, APIKey: key, ProfileURL: "/agents/" + a.ID})
	return nil
}

// checkKeyProof refuses a public key registered without proof that the
// registering agent holds its private key (attest.VerifyKeyProof), so
// that no one registers another agent's key and passes its signed
// records off as their own (docs/threat-model.md "The public edge").
// Registering without a key needs no proof.
func (s *Server) checkKeyProof(n dotlab.NewAgent) error {
	if n.PublicKey == "" {
		if n.KeyProof != "" {
			return dotlab.Errorf(dotlab.EINVALID, "$.key_proof: given without $.public_key: send both, or neither")
		}
		return nil
	}
	pub, err := attest.ParsePublicKey(n.PublicKey)
	if err != nil {
		return err
	}
	origin := ""
	if s.log != nil {
		origin = s.log.Origin()
	}
	return attest.VerifyKeyProof(pub, origin, n.Name, n.KeyProof, s.clock.Now())
}

// handleAgentMe is GET /agents/me: the caller's own profile.
func (s *Server) handleAgentMe(w http.ResponseWriter, r *http.Request) error {
	p, err := s.store.FindAgent(r.Context(), agentFrom(r).ID)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, p)
	return nil
}

// handleAgent is GET /agents/{id}.
func (s *Server) handleAgent(w http.ResponseWriter, r *http.Request) error {
	p, err := s.store.FindAgent(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, p)
	return nil
}

// handleAgentActivity is GET /agents/{id}/activity, newest first.
func (s *Server) handleAgentActivity(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, 50)
	if err != nil {
		return err
	}
	act, err := s.store.AgentActivity(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	if act == nil {
		act = []dotlab.Activity{}
	}
	s.writeJSON(w, http.StatusOK, apiv1.ActivityPage{Activity: act})
	return nil
}
