package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// handlePublishRun is POST /runs: the official run of the caller's job.
func (s *Server) handlePublishRun(w http.ResponseWriter, r *http.Request) error {
	var b dotlab.RunBody
	raw, err := s.readRawBody(w, r, &b)
	if err != nil {
		return err
	}
	run, err := s.store.PublishRun(r.Context(), agentFrom(r), &b, raw)
	if err != nil {
		return err
	}
	s.wake(run.ClaimID)
	w.Header().Set("Location", "/api/v1/runs/"+run.ID)
	s.writeJSON(w, http.StatusCreated, run)
	return nil
}

// handleRun is GET /runs/{id}. A run whose claim is settled is kept in the
// read cache (readcache.go); it still changes when its logs arrive, and
// that change is announced like every other.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	key := cacheKey{cacheRun, id}
	if b, ok := s.cache.get(key); ok {
		writeBody(w, http.StatusOK, "application/json", b)
		return nil
	}
	tok := s.cache.begin("")
	run, err := s.store.FindRun(r.Context(), id)
	if err != nil {
		return err
	}
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if run.Status == dotlab.StateSettled && run.ID == id {
		s.cache.put(tok, key, run.ClaimID, b)
	}
	writeBody(w, http.StatusOK, "application/json", b)
	return nil
}

// handleRuns is GET /runs?status=&after=&limit=: one page of runs, without
// their values (dotlab.RunListing).
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, 50)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	runs, err := s.store.FindRuns(r.Context(), dotlab.RunFilter{Status: dotlab.ClaimState(q.Get("status")), After: q.Get("after"), Limit: limit})
	if err != nil {
		return err
	}
	page := apiv1.RunPage{Runs: linkRuns(runs)}
	if len(runs) == limit {
		page.Next = runs[len(runs)-1].ClaimID
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}
