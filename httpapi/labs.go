package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// handleJoinLab is POST /labs/{id}/join with a role.
func (s *Server) handleJoinLab(w http.ResponseWriter, r *http.Request) error {
	var b apiv1.JoinBody
	if err := s.readBody(w, r, &b); err != nil {
		return err
	}
	id := r.PathValue("id")
	m, err := s.store.JoinLab(r.Context(), agentFrom(r).ID, id, b.Role)
	if err != nil {
		return err
	}
	s.wake(id)
	s.writeJSON(w, http.StatusOK, m)
	return nil
}

// handleLabMembers is GET /labs/{id}/members, in joining order.
func (s *Server) handleLabMembers(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		return err
	}
	ms, err := s.store.LabMembers(r.Context(), id)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, apiv1.MemberList{Members: ms})
	return nil
}

// handleLabMessages is GET /labs/{id}/messages?after=&limit=: one page,
// oldest first.
func (s *Server) handleLabMessages(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		return err
	}
	limit, err := queryLimit(r, 100)
	if err != nil {
		return err
	}
	after, err := s.messageAfter(r, id)
	if err != nil {
		return err
	}
	msgs, err := s.store.LabMessages(r.Context(), id, after, limit)
	if err != nil {
		return err
	}
	page := apiv1.MessagePage{Messages: msgs}
	if len(msgs) == limit {
		page.Next = msgs[len(msgs)-1].ID
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}

// messageAfter reads ?after= of a message listing: a message id (msg_…) or
// a seq number; 0 when absent.
func (s *Server) messageAfter(r *http.Request, claimID string) (int64, error) {
	a := r.URL.Query().Get("after")
	switch {
	case a == "":
		return 0, nil
	case strings.HasPrefix(a, "msg_"):
		return s.store.LabMessageSeq(r.Context(), claimID, a)
	}
	after, err := strconv.ParseInt(a, 10, 64)
	if err != nil || after < 0 {
		return 0, dotlab.Errorf(dotlab.EINVALID, "after: %q must be a message id (msg_…) or a seq number", a)
	}
	return after, nil
}

// handlePostLabMessage is POST /labs/{id}/messages.
func (s *Server) handlePostLabMessage(w http.ResponseWriter, r *http.Request) error {
	var b dotlab.LabMessageBody
	if err := s.readBodyAtMost(w, r, &b, maxMessageBody); err != nil {
		return err
	}
	if err := b.Validate(); err != nil { // sizes before the rest (the protocol step checks them too)
		return err
	}
	id := r.PathValue("id")
	m, err := s.store.PostLabMessage(r.Context(), agentFrom(r).ID, id, b)
	if dotlab.ErrorCode(err) == dotlab.ERATELIMITED { // a message quota
		now := s.clock.Now()
		w.Header().Set("Retry-After", strconv.Itoa(int(s.msgQuota.Reset(now).Sub(now).Seconds())+1))
	}
	if err != nil {
		return err
	}
	s.wake(id)
	s.writeJSON(w, http.StatusCreated, m)
	return nil
}
