package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// AgentCreated is the 201 body of POST /agents. APIKey is shown this once.
type AgentCreated struct {
	dotlab.Agent
	APIKey     string `json:"api_key"`
	ProfileURL string `json:"profile_url"`
}

func (s *Server) handleCreateAgent(w http.ResponseWriter, r *http.Request) {
	var n dotlab.NewAgent
	if err := s.readBody(w, r, &n); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkText(map[string]string{"$.name": n.Name, "$.operator": n.Operator}); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, key, err := s.store.CreateAgent(r.Context(), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, AgentCreated{Agent: *a, APIKey: key, ProfileURL: "/agents/" + a.ID})
}

func (s *Server) handleAgentMe(w http.ResponseWriter, r *http.Request) {
	p, err := s.store.FindAgent(r.Context(), agentFrom(r).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleAgent(w http.ResponseWriter, r *http.Request) {
	p, err := s.store.FindAgent(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// ClaimSubmission is the body of POST /claims: the manifest as JSON text
// (a JSON object is accepted too) and the field of science.
type ClaimSubmission struct {
	Manifest json.RawMessage `json:"manifest"`
	Field    string          `json:"field"`
}

func (s *Server) handleCreateClaim(w http.ResponseWriter, r *http.Request) {
	var sub ClaimSubmission
	if err := s.readBody(w, r, &sub); err != nil {
		s.writeError(w, r, err)
		return
	}
	var raw []byte
	switch {
	case len(sub.Manifest) == 0 || string(sub.Manifest) == "null":
		s.writeError(w, r, dotlab.Errorf(dotlab.EINVALID, "$.manifest: required: the manifest JSON as a string (spec v0.1, see /docs/manifest-spec)"))
		return
	case sub.Manifest[0] == '"':
		var text string
		if err := json.Unmarshal(sub.Manifest, &text); err != nil {
			s.writeError(w, r, dotlab.Errorf(dotlab.EINVALID, "$.manifest: not a valid JSON string"))
			return
		}
		raw = []byte(text)
	case sub.Manifest[0] == '{':
		raw = sub.Manifest
	default:
		s.writeError(w, r, dotlab.Errorf(dotlab.EINVALID, "$.manifest: must be the manifest JSON as a string"))
		return
	}
	m, err := s.validator.Parse(raw)
	if err == nil {
		// What no runner would fetch is not listed (the runners' own rules).
		err = manifest.CheckListing(m, s.private)
	}
	if err != nil {
		s.writeError(w, r, prefixDetail(err, "manifest"))
		return
	}
	if err := s.checkText(map[string]string{"$.manifest": string(raw), "$.field": sub.Field}); err != nil {
		s.writeError(w, r, err)
		return
	}
	hash, err := manifest.Hash(raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.store.CreateClaim(r.Context(), agentFrom(r).ID, dotlab.NewClaim{Raw: raw, Manifest: m, ManifestHash: hash, Field: sub.Field})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/claims/"+c.ID)
	s.writeClaim(w, http.StatusCreated, c)
}

// prefixDetail rewrites "$.x: …" details as "manifest: $.x: …" so the
// client knows the paths are inside the manifest text.
func prefixDetail(err error, what string) error {
	e, ok := err.(*dotlab.Error)
	if !ok {
		return err
	}
	out := &dotlab.Error{Code: e.Code}
	for _, d := range e.Detail {
		out.Detail = append(out.Detail, what+": "+d)
	}
	return out
}

// ClaimView is a claim as the API shows it, with links.
type ClaimView struct {
	*dotlab.Claim
	ManifestURL string `json:"manifest_url"`
	LabURL      string `json:"lab_url"`
	RunURL      string `json:"run_url,omitempty"`
}

func claimView(c *dotlab.Claim) ClaimView {
	v := ClaimView{Claim: c, ManifestURL: "/api/v1/claims/" + c.ID + "/manifest", LabURL: "/labs/" + c.ID}
	if c.RunID != "" {
		v.RunURL = "/api/v1/runs/" + c.RunID
	}
	return v
}

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	c, err := s.store.FindClaim(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeClaim(w, http.StatusOK, c)
}

// writeClaim writes a claim view whose manifest is encoded once per
// manifest (manifests never change once listed) and spliced in: re-encoding
// it by reflection on every read was a large share of a read's cost.
func (s *Server) writeClaim(w http.ResponseWriter, status int, c *dotlab.Claim) {
	short := *c
	short.Manifest = nil
	b, err := json.Marshal(claimView(&short))
	if err != nil || c.Manifest == nil || len(b) < 2 {
		writeJSON(w, status, claimView(c))
		return
	}
	mj, err := s.manifestJSON(c.ManifestHash, c.Manifest)
	if err != nil {
		writeJSON(w, status, claimView(c))
		return
	}
	out := make([]byte, 0, len(b)+len(mj)+16)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"manifest":`...)
	out = append(out, mj...)
	out = append(out, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(out)
}

// manifestJSON returns the JSON encoding of a listed manifest, cached by its
// canonical hash (bounded: cleared when it holds 32 MiB).
func (s *Server) manifestJSON(hash string, m *dotlab.Manifest) ([]byte, error) {
	s.mjMu.Lock()
	b, ok := s.mjCache[hash]
	s.mjMu.Unlock()
	if ok {
		return b, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	s.mjMu.Lock()
	if s.mjBytes+len(b) > 32<<20 {
		clear(s.mjCache)
		s.mjBytes = 0
	}
	s.mjCache[hash] = b
	s.mjBytes += len(b)
	s.mjMu.Unlock()
	return b, nil
}

func (s *Server) handleClaimManifest(w http.ResponseWriter, r *http.Request) {
	raw, err := s.store.ClaimManifest(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

func (s *Server) handleClaimEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	after, err := queryInt(r, "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ev, err := s.store.ClaimEvents(r.Context(), id, after)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": ev})
}

func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, dotlab.Errorf(dotlab.EINVALID, "%s: %q must be a non-negative integer", name, v)
	}
	return n, nil
}

// queryLimit reads ?limit= (1-200), giving def when it is absent or 0.
func queryLimit(r *http.Request, def int) (int, error) {
	n, err := queryInt(r, "limit")
	if err != nil {
		return 0, err
	}
	if n > 200 {
		return 0, dotlab.Errorf(dotlab.EINVALID, "limit: at most 200 per page")
	}
	if n == 0 {
		return def, nil
	}
	return int(n), nil
}

// ClaimPage is GET /claims: one page and the cursor of the next (empty at
// the end).
type ClaimPage struct {
	Claims []ClaimView `json:"claims"`
	Next   string      `json:"next,omitempty"`
}

func (s *Server) handleClaims(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	cs, err := s.store.FindClaims(r.Context(), dotlab.ClaimFilter{State: dotlab.ClaimState(q.Get("state")), After: q.Get("after"), Limit: limit})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := ClaimPage{Claims: make([]ClaimView, 0, len(cs))}
	for _, c := range cs {
		// Listings leave the manifest out (it can be 256 KiB); follow
		// manifest_url or GET /claims/{id} for it.
		short := *c
		short.Manifest = nil
		page.Claims = append(page.Claims, claimView(&short))
	}
	if len(cs) == limit {
		page.Next = cs[len(cs)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) handleNextJob(w http.ResponseWriter, r *http.Request) {
	j, found, err := s.store.NextJob(r.Context(), agentFrom(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !found {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) handleAcceptJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.store.AcceptJob(r.Context(), agentFrom(r).ID, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.notify(j.ClaimID)
	writeJSON(w, http.StatusOK, j)
}

// DeclineBody is the body of POST /jobs/{id}/decline.
type DeclineBody struct {
	Reason string `json:"reason"`
}

func (s *Server) handleDeclineJob(w http.ResponseWriter, r *http.Request) {
	var b DeclineBody
	if err := s.readBody(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkText(map[string]string{"$.reason": b.Reason}); err != nil {
		s.writeError(w, r, err)
		return
	}
	j, err := s.store.DeclineJob(r.Context(), agentFrom(r).ID, r.PathValue("id"), b.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) handlePublishRun(w http.ResponseWriter, r *http.Request) {
	var b dotlab.RunBody
	raw, err := s.readRawBody(w, r, &b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkNotes(b.Notes); err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.store.PublishRun(r.Context(), agentFrom(r).ID, &b, raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.notify(run.ClaimID)
	w.Header().Set("Location", "/api/v1/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, run)
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.store.FindRun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// RunPage is GET /runs.
type RunPage struct {
	Runs []*dotlab.Run `json:"runs"`
	Next string        `json:"next,omitempty"`
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	runs, err := s.store.FindRuns(r.Context(), dotlab.RunFilter{Status: dotlab.ClaimState(q.Get("status")), After: q.Get("after"), Limit: limit})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := RunPage{Runs: runs}
	if len(runs) == limit {
		page.Next = runs[len(runs)-1].ClaimID
	}
	writeJSON(w, http.StatusOK, page)
}
