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
	d, err := s.store.CastVote(r.Context(), agentFrom(r), r.PathValue("id"), b)
	if err != nil {
		return err
	}
	s.wake(d.ID)
	s.writeJSON(w, http.StatusOK, d)
	return nil
}

// handleCommit is POST /disputes/{id}/commit (sealed votes).
func (s *Server) handleCommit(w http.ResponseWriter, r *http.Request) error {
	var b dotlab.CommitBody
	if err := s.readBodyAtMost(w, r, &b, maxVoteBody); err != nil {
		return err
	}
	d, err := s.store.CommitVote(r.Context(), agentFrom(r), r.PathValue("id"), b)
	if err != nil {
		return err
	}
	s.wake(d.ID)
	s.writeJSON(w, http.StatusOK, d)
	return nil
}

// handleReveal is POST /disputes/{id}/reveal (sealed votes).
func (s *Server) handleReveal(w http.ResponseWriter, r *http.Request) error {
	var b dotlab.RevealBody
	if err := s.readBodyAtMost(w, r, &b, maxVoteBody); err != nil {
		return err
	}
	d, err := s.store.RevealVote(r.Context(), agentFrom(r), r.PathValue("id"), b)
	if err != nil {
		return err
	}
	s.wake(d.ID)
	s.writeJSON(w, http.StatusOK, d)
	return nil
}

// voteMode is the review mode GET /status names.
func voteMode(w dotlab.Windows) string {
	if w.Sealed {
		return "sealed"
	}
	return "open"
}
