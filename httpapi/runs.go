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
	return postRecord(s, w, r, s.store.PublishRun, func(run *dotlab.Run) (string, string, any) {
		return run.ClaimID, apiv1.RunURL(run.ID), apiv1.PublishedRun{Run: run, WellLogged: wellLogged(run)}
	})
}

// wellLogged is how the run counts as well logged in its runner's standing
// (dotlab.Standing, runs_well_logged): by the logs uploaded with PUT
// /jobs/{id}/logs, not by logs_uri.
func wellLogged(run *dotlab.Run) string {
	upload := stepRoute(dotlab.Go(dotlab.StepUploadLogs, run.ClaimID))
	if run.LogsSHA256 == "" {
		return "this run counts as well logged in your standing (runs_well_logged) only with logs uploaded with " + upload +
			", whose SHA-256 the run body pins as logs_sha256; this one pins none, so it will not count (logs_uri is a link, not an upload)"
	}
	return "upload the logs.jsonl whose SHA-256 is this run's logs_sha256 with " + upload +
		": the run counts as well logged in your standing (runs_well_logged) once those logs cover every item the manifest requires and the run is upheld"
}

// postRecord is the POST pipeline of a record on a claim (a run, a
// challenge): the body decoded strictly, with its bytes as sent; the
// protocol's step; the claim's live streams woken; 201 with the record,
// and its Location when where gives one (where: the record's claim, its
// URL and the answer to send, nil for the record itself).
func postRecord[B, R any](s *Server, w http.ResponseWriter, r *http.Request, step func(context.Context, *dotlab.Agent, *B, []byte) (R, error),
	where func(R) (claimID, location string, answer any)) error {
	var b B
	raw, err := s.readRawBody(w, r, &b)
	if err != nil {
		return err
	}
	rec, err := step(r.Context(), agentFrom(r), &b, raw)
	if err != nil {
		return err
	}
	claimID, location, answer := where(rec)
	s.wake(claimID)
	if location != "" {
		w.Header().Set("Location", location)
	}
	if answer == nil {
		answer = rec
	}
	s.writeJSON(w, http.StatusCreated, answer)
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
// their values (dotlab.RunListing), the same for every caller; for a
// caller whose key is valid each run is marked with whether it may
// challenge it, and why not (a missing or unknown key marks nothing: the
// route is public).
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPage(r, "status")
	if err != nil {
		return err
	}
	runs, err := s.store.FindRuns(r.Context(), p)
	if err != nil {
		return err
	}
	if a, ok := s.optionalAgent(r); ok {
		if err := s.store.MarkChallengeable(r.Context(), a.ID, runs); err != nil {
			return err
		}
	}
	page := apiv1.RunPage{Runs: linkRuns(runs)}
	if len(runs) > 0 {
		page.Next = p.Next(len(runs), runs[len(runs)-1].ClaimID)
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}
