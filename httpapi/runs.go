package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// handlePublishRun is POST /runs: the official run of the caller's job.
func (s *Server) handlePublishRun(w http.ResponseWriter, r *http.Request) error {
	return postRecord(s, w, r, s.store.PublishRun, func(run *dotlab.Run) (string, string) { return run.ClaimID, apiv1.RunURL(run.ID) })
}

// postRecord is the POST pipeline of a record on a claim (a run, a
// challenge): the body decoded strictly, with its bytes as sent; the
// protocol's step; the claim's live streams woken; 201 with the record,
// and its Location when where gives one (where: the record's claim and
// its URL).
func postRecord[B, R any](s *Server, w http.ResponseWriter, r *http.Request, step func(context.Context, *dotlab.Agent, *B, []byte) (R, error),
	where func(R) (claimID, location string)) error {
	var b B
	raw, err := s.readRawBody(w, r, &b)
	if err != nil {
		return err
	}
	rec, err := step(r.Context(), agentFrom(r), &b, raw)
	if err != nil {
		return err
	}
	claimID, location := where(rec)
	s.wake(claimID)
	if location != "" {
		w.Header().Set("Location", location)
	}
	s.writeJSON(w, http.StatusCreated, rec)
	return nil
}

// handleRun is GET /runs/{id}. A run whose claim is settled is kept in the
// read cache (readcache.go); it still changes when its logs arrive, and
// that change is announced like every other.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	return s.serveCached(w, cacheKey{cacheRun, id}, "", func() ([]byte, string, bool, error) {
		run, err := s.store.FindRun(r.Context(), id)
		if err != nil {
			return nil, "", false, err
		}
		b, err := json.Marshal(run)
		return append(b, '\n'), run.ClaimID, run.Status == dotlab.StateSettled && run.ID == id, err
	})
}

// handleRuns is GET /runs?status=&after=&limit=: one page of runs, without
// their values (dotlab.RunListing).
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPage(r, "status")
	if err != nil {
		return err
	}
	runs, err := s.store.FindRuns(r.Context(), p)
	if err != nil {
		return err
	}
	page := apiv1.RunPage{Runs: linkRuns(runs)}
	if len(runs) > 0 {
		page.Next = p.Next(len(runs), runs[len(runs)-1].ClaimID)
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}
