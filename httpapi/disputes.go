package httpapi

import (
	"net/http"

	"github.com/dotlab/dotlab"
)

// handleNextDispute is GET /disputes/next: the dispute the caller is
// assigned to review, or 204.
func (s *Server) handleNextDispute(w http.ResponseWriter, r *http.Request) error {
	d, found, err := s.store.NextDispute(r.Context(), agentFrom(r).ID)
	if err != nil {
		return err
	}
	if !found {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	s.writeJSON(w, http.StatusOK, d)
	return nil
}

// handleDispute is GET /disputes/{id}.
func (s *Server) handleDispute(w http.ResponseWriter, r *http.Request) error {
	d, err := s.store.FindDispute(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, d)
	return nil
}

// handleVote is POST /disputes/{id}/vote.
func (s *Server) handleVote(w http.ResponseWriter, r *http.Request) error {
	var b dotlab.VoteBody
	if err := s.readBodyAtMost(w, r, &b, maxVoteBody); err != nil {
		return err
	}
	if err := b.Validate(); err != nil { // its bounds before the screen
		return err
	}
	if err := s.leaks.Check("$.rationale", b.Rationale); err != nil {
		return err
	}
	if err := checkVoteBody(r.Context(), agentFrom(r), r.PathValue("id"), &b); err != nil {
		return err
	}
	d, err := s.store.CastVote(r.Context(), agentFrom(r).ID, r.PathValue("id"), b)
	if err != nil {
		return err
	}
	s.wake(d.ID)
	s.writeJSON(w, http.StatusOK, d)
	return nil
}
