package httpapi

import (
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// handleCreateChallenge is POST /challenges: a rerun that disagrees with
// (or confirms) a published run.
func (s *Server) handleCreateChallenge(w http.ResponseWriter, r *http.Request) error {
	return postRecord(s, w, r, nil, s.store.CreateChallenge, func(ch *dotlab.Challenge) (string, string, any) { return ch.ClaimID, "", nil })
}

// handleChallenges is GET /claims/{id}/challenges, in the order posted.
func (s *Server) handleChallenges(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		return err
	}
	chs, err := s.store.FindChallenges(r.Context(), id)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, apiv1.ChallengeList{Challenges: chs})
	return nil
}
