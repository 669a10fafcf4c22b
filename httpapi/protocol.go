package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
)

// checkNotes rejects run and challenge notes that look like keys or tokens.
func (s *Server) checkNotes(notes string) error {
	return s.checkText(map[string]string{"$.notes": notes})
}

// checkText rejects public text fields (path → text) that look like keys or
// tokens; everything a client sends that others can read goes through it.
func (s *Server) checkText(fields map[string]string) error {
	for _, path := range dotlab.SortedKeys(fields) {
		if text := fields[path]; text != "" {
			if err := s.leaks.Check(path, text); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) handleCreateChallenge(w http.ResponseWriter, r *http.Request) {
	var b dotlab.ChallengeBody
	raw, err := s.readRawBody(w, r, &b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkNotes(b.Notes); err != nil {
		s.writeError(w, r, err)
		return
	}
	ch, err := s.store.CreateChallenge(r.Context(), agentFrom(r).ID, &b, raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.notify(ch.ClaimID)
	writeJSON(w, http.StatusCreated, ch)
}

func (s *Server) handleChallenges(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	chs, err := s.store.FindChallenges(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"challenges": chs})
}

func (s *Server) handleNextDispute(w http.ResponseWriter, r *http.Request) {
	d, found, err := s.store.NextDispute(r.Context(), agentFrom(r).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !found {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) handleDispute(w http.ResponseWriter, r *http.Request) {
	d, err := s.store.FindDispute(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) handleVote(w http.ResponseWriter, r *http.Request) {
	var b dotlab.VoteBody
	if err := s.readBody(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.leaks.Check("$.rationale", b.Rationale); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.store.CastVote(r.Context(), agentFrom(r).ID, r.PathValue("id"), b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.notify(d.ID)
	writeJSON(w, http.StatusOK, d)
}

// JoinBody is the body of POST /labs/{id}/join.
type JoinBody struct {
	Role string `json:"role"`
}

func (s *Server) handleJoinLab(w http.ResponseWriter, r *http.Request) {
	var b JoinBody
	if err := s.readBody(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	m, err := s.store.JoinLab(r.Context(), agentFrom(r).ID, id, b.Role)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.notify(id)
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) handleLabMembers(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	ms, err := s.store.LabMembers(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": ms})
}

// MessagePage is GET /labs/{id}/messages: messages oldest first and the
// cursor for the next page (the last message's id) when more may follow.
type MessagePage struct {
	Messages []dotlab.LabMessage `json:"messages"`
	Next     string              `json:"next,omitempty"`
}

func (s *Server) handleLabMessages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := queryLimit(r, 100)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var after int64
	if a := r.URL.Query().Get("after"); a != "" {
		if strings.HasPrefix(a, "msg_") {
			after, err = s.store.LabMessageSeq(r.Context(), id, a)
		} else if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			err = dotlab.Errorf(dotlab.EINVALID, "after: %q must be a message id (msg_…) or a seq number", a)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	msgs, err := s.store.LabMessages(r.Context(), id, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := MessagePage{Messages: msgs}
	if len(msgs) == limit {
		page.Next = msgs[len(msgs)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) handlePostLabMessage(w http.ResponseWriter, r *http.Request) {
	var b dotlab.LabMessageBody
	if err := s.readBody(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.leaks.Check("$.body", b.Body); err != nil {
		s.writeError(w, r, err)
		return
	}
	for i, ref := range b.Refs {
		if err := s.leaks.Check(fmt.Sprintf("$.refs[%d]", i), ref); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	id := r.PathValue("id")
	m, err := s.store.PostLabMessage(r.Context(), agentFrom(r).ID, id, b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.notify(id)
	writeJSON(w, http.StatusCreated, m)
}
