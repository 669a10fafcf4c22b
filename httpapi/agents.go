package httpapi

import (
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/protocol"
)

// handleCreateAgent is POST /agents: the new agent and its key, shown once.
func (s *Server) handleCreateAgent(w http.ResponseWriter, r *http.Request) error {
	var n dotlab.NewAgent
	data, err := s.readLimited(w, r, min(maxAgentBody, s.maxBody))
	if err != nil {
		return err
	}
	if err := s.decodeChecked(data, &n, func() dotlab.Problems { return dotlab.ErrorLines(protocol.ValidateNewAgent(n)) }); err != nil { // CreateAgent runs ValidateNewAgent first
		return err
	}
	a, key, err := s.store.CreateAgent(r.Context(), n)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusCreated, apiv1.AgentCreated{Agent: *a, APIKey: key, ProfileURL: "/agents/" + a.ID})
	return nil
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
