package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// handlePublishRun is POST /runs: the official run of the caller's job.
func (s *Server) handlePublishRun(w http.ResponseWriter, r *http.Request) error {
	early := func(raw []byte) error {
		if len(raw) <= earlyRoleBytes {
			return nil
		}
		if job, ok := peekJobID(raw); ok {
			return s.store.MayPublishRun(r.Context(), agentFrom(r).ID, job)
		}
		return nil
	}
	return postRecord(s, w, r, early, s.store.PublishRun, func(run *dotlab.Run) (string, string, any) {
		return run.ClaimID, apiv1.RunURL(run.ID), apiv1.PublishedRun{Run: run, WellLogged: wellLogged(run)}
	})
}

// earlyRoleBytes: a run body longer than this is checked for its caller's
// role on its job_id before it is decoded whole (decoding a megabyte
// strictly costs about 20 ms of CPU and 8 MiB; docs/threat-model.md "Work
// before the right to act"). Smaller bodies are decoded first, so that one
// 422 lists every problem they have (docs/protocol.md §5).
const earlyRoleBytes = 64 << 10

// peekJobID reads the top-level "job_id" string of a JSON object body
// without decoding the rest (each other value is skipped as raw bytes);
// ok is false when the body is not such an object or names a job_id that
// is not a claim id (the strict decoding then says why).
func peekJobID(raw []byte) (string, bool) {
	id, ok := peekString(raw, "job_id")
	if !ok || !dotlab.ValidClaimID(id) {
		return "", false
	}
	return id, true
}

// peekString reads the string at top-level key of the JSON object raw
// without decoding the rest (each other value is only scanned); ok is
// false when raw is not an object, the key is absent or not a string.
func peekString(raw []byte, key string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		k, isKey := t.(string)
		if err != nil || !isKey {
			return "", false
		}
		if k == key {
			var v string
			if dec.Decode(&v) != nil {
				return "", false
			}
			return v, true
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
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
// challenge): the body read, early's cheap check of its raw bytes (nil:
// none), then the body decoded strictly, with its bytes as sent; the
// protocol's step; the claim's live streams woken; 201 with the record,
// and its Location when where gives one (where: the record's claim, its
// URL and the answer to send, nil for the record itself).
func postRecord[B, R any](s *Server, w http.ResponseWriter, r *http.Request, early func(raw []byte) error,
	step func(context.Context, *dotlab.Agent, *B, []byte) (R, error), where func(R) (claimID, location string, answer any)) error {
	raw, err := s.readAll(w, r)
	if err != nil {
		return err
	}
	if early != nil {
		if err := early(raw); err != nil {
			return err
		}
	}
	var b B
	if err := s.decode(raw, &b); err != nil {
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
