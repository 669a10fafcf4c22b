package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/dotlab/dotlab/apiv1"
)

// handlePutInput is PUT /claims/{id}/inputs/{sha256} (docs/protocol.md
// "Input archive"): the body, streamed, is kept when it hashes to
// {sha256}. Who, role, pin, size and quota are checked before a byte is
// read (protocol PutInput); 201 when stored, 200 when already held.
func (s *Server) handlePutInput(w http.ResponseWriter, r *http.Request) error {
	id, sum := r.PathValue("id"), r.PathValue("sha256")
	if err := s.store.CheckPutInput(r.Context(), agentFrom(r).ID, id, sum, r.ContentLength); err != nil {
		return err
	}
	// The server reads a request within a minute (server.ConnLimits); a
	// blob is given that plus a second per MiB announced (unknown: an
	// hour), at most two hours.
	budget := time.Hour
	if r.ContentLength >= 0 {
		budget = min(2*time.Hour, time.Minute+time.Duration(r.ContentLength>>20)*time.Second)
	}
	// A connection deadline is on the wall clock (the net package's), not
	// the injected one: a test or skewed clock would set it in the past.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(budget))
	in, err := s.store.PutInput(r.Context(), agentFrom(r).ID, id, sum, r.ContentLength, r.Body)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if in.Stored {
		status = http.StatusCreated
	}
	s.writeJSON(w, status, in)
	return nil
}

// handleInput is GET /claims/{id}/inputs/{sha256}: the archived bytes, to
// an agent with a rerunning role on the claim (protocol Input), as
// application/octet-stream. The reader verifies them by their hash.
func (s *Server) handleInput(w http.ResponseWriter, r *http.Request) error {
	rc, n, err := s.store.Input(r.Context(), agentFrom(r).ID, r.PathValue("id"), r.PathValue("sha256"))
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	if r.Method == http.MethodHead {
		return nil
	}
	io.CopyN(w, rc, n)
	return nil
}

// handleReportCanary is POST /claims/{id}/canary: an agent's reports on
// the claim's pinned URLs (protocol ReportCanary), answered with the
// latest report per URL.
func (s *Server) handleReportCanary(w http.ResponseWriter, r *http.Request) error {
	var b apiv1.CanaryBody
	if err := s.readBody(w, r, &b); err != nil {
		return err
	}
	id := r.PathValue("id")
	list, err := s.store.ReportCanary(r.Context(), agentFrom(r).ID, id, b.Reports)
	if err != nil {
		return err
	}
	s.wake(id)
	s.writeJSON(w, http.StatusOK, apiv1.CanaryList{Reports: list})
	return nil
}

// handleCanary is GET /claims/{id}/canary (public): the latest report on
// each pinned URL, by URL.
func (s *Server) handleCanary(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		return err
	}
	list, err := s.store.LatestCanaryReports(r.Context(), id)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, apiv1.CanaryList{Reports: list})
	return nil
}
