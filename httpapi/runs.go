package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/netpolicy"
)

// handlePublishRun is POST /runs: the official run of the caller's job.
func (s *Server) handlePublishRun(w http.ResponseWriter, r *http.Request) error {
	var b dotlab.RunBody
	raw, err := s.readRawBody(w, r, &b)
	if err != nil {
		return err
	}
	if err := s.checkNotes(b.Notes); err != nil {
		return err
	}
	if err := s.checkLogsURI(b.LogsURI); err != nil {
		return err
	}
	if err := checkSignedRun(r.Context(), agentFrom(r), &b); err != nil {
		return err
	}
	run, err := s.store.PublishRun(r.Context(), agentFrom(r).ID, &b, raw)
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

// checkLogsURI holds a run's or challenge's logs_uri, when given, to the
// server's URL rules (docs/protocol.md §6): an https:// URL with a host
// that is not a loopback, private, link-local or metadata address literal
// nor a localhost name, without credentials (internal/netpolicy, the rules
// of a listing). With Config.AllowPrivateURLs (`dotlab serve
// --allow-private-urls`: a private deployment, the demo and tests on
// loopback) plain http:// and loopback or private hosts pass too;
// link-local and metadata addresses never do. Errors: 422 invalid at
// $.logs_uri.
func (s *Server) checkLogsURI(uri string) error {
	if uri == "" {
		return nil
	}
	u, err := netpolicy.Rules{AllowPrivate: s.private}.URL("$.logs_uri", uri)
	if err != nil {
		return dotlab.Errorf(dotlab.EINVALID, "%v", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return dotlab.Errorf(dotlab.EINVALID, "$.logs_uri: must be an https:// URL of your full logs")
	}
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
	page := apiv1.RunPage{Runs: runs}
	if len(runs) == limit {
		page.Next = runs[len(runs)-1].ClaimID
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}
