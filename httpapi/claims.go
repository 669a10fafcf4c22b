package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/protocol"
)

// handleCreateClaim is POST /claims: decode the submission and check its
// field and manifest (parse and validate it, refuse what no runner would
// fetch, hash it), every problem of both in one 422; then the protocol's
// list step (duplicates, the secret screen).
func (s *Server) handleCreateClaim(w http.ResponseWriter, r *http.Request) error {
	data, err := s.readAll(w, r)
	if err != nil {
		return err
	}
	if err := oversizedField(data); err != nil {
		return err
	}
	var sub apiv1.ClaimSubmission
	var nc dotlab.NewClaim
	var refused error // a refusal of the manifest that is not a 422
	check := func() dotlab.Problems {
		var p dotlab.Problems
		nc, p, refused = s.checkSubmission(sub)
		return p
	}
	if err := s.decodeChecked(data, &sub, check); err != nil {
		return err
	}
	if err := check().Err(); err != nil { // decoded: the field's and manifest's problems, in one 422
		return err
	}
	if refused != nil {
		return refused
	}
	c, err := s.store.CreateClaim(r.Context(), agentFrom(r).ID, nc)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/claims/"+c.ID)
	s.writeClaim(w, http.StatusCreated, c)
	return nil
}

// oversizedField refuses, before the body is decoded whole, a large
// submission whose field is over its size bound (protocol.CheckTextSizes):
// decoding a megabyte body twice (strictjson's checks, then the values)
// was most of such a refusal's cost (TestOversizedBodiesCostLittle's 20 ms).
// Bodies of earlyRoleBytes or less are decoded whole, every problem in one 422.
func oversizedField(data []byte) error {
	if len(data) <= earlyRoleBytes {
		return nil
	}
	field, ok := peekString(data, "field")
	if !ok {
		return nil
	}
	return protocol.CheckTextSizes(map[string]string{"$.field": field})
}

// checkSubmission checks a claim submission without the database: the
// field (its size bound first, protocol.CheckTextSizes, then
// protocol.ValidateField) and the manifest, parsed and held to the listing
// rules. It returns the claim to list, or the problems of both (paths
// inside the manifest prefixed "manifest: "), or refused, an error of
// another code than EINVALID.
func (s *Server) checkSubmission(sub apiv1.ClaimSubmission) (nc dotlab.NewClaim, p dotlab.Problems, refused error) {
	if err := protocol.CheckTextSizes(map[string]string{"$.field": sub.Field}); err != nil {
		p = append(p, dotlab.ErrorLines(err)...)
	} else {
		p = append(p, dotlab.ErrorLines(protocol.ValidateField(sub.Field))...)
	}
	raw, err := submittedManifest(sub)
	var m *dotlab.Manifest
	if err == nil {
		if m, err = s.validator.Parse(raw); err == nil {
			// What no runner would fetch is not listed (the runners' own rules).
			err = prefixDetail(manifest.CheckListing(m, s.private), "manifest")
		} else {
			err = prefixDetail(err, "manifest")
		}
	}
	var hash string
	if err == nil {
		hash, err = manifest.Hash(raw)
	}
	if err != nil && (dotlab.ErrorCode(err) != dotlab.EINVALID || len(dotlab.ErrorLines(err)) == 0) {
		return nc, nil, err
	}
	p = append(p, dotlab.ErrorLines(err)...)
	return dotlab.NewClaim{Raw: raw, Manifest: m, ManifestHash: hash, Field: sub.Field}, p, nil
}

// submittedManifest returns the manifest text of a submission: a JSON
// string holding it, or (accepted too) the JSON object itself.
func submittedManifest(sub apiv1.ClaimSubmission) ([]byte, error) {
	switch {
	case len(sub.Manifest) == 0 || string(sub.Manifest) == "null":
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.manifest: required: the manifest JSON as a string (spec v0.1, see /docs/manifest-spec)")
	case sub.Manifest[0] == '"':
		var text string
		if err := json.Unmarshal(sub.Manifest, &text); err != nil {
			return nil, dotlab.Errorf(dotlab.EINVALID, "$.manifest: not a valid JSON string")
		}
		return []byte(text), nil
	case sub.Manifest[0] == '{':
		return sub.Manifest, nil
	}
	return nil, dotlab.Errorf(dotlab.EINVALID, "$.manifest: must be the manifest JSON as a string")
}

// prefixDetail rewrites "$.x: …" details as "manifest: $.x: …" so the
// client knows the paths are inside the manifest text.
func prefixDetail(err error, what string) error {
	var e *dotlab.Error
	if !errors.As(err, &e) {
		return err
	}
	out := &dotlab.Error{Code: e.Code}
	for _, d := range e.Detail {
		out.Detail = append(out.Detail, what+": "+d)
	}
	return out
}

// listedClaim is a claim as listings show it: without its manifest (it can
// be 256 KiB; follow manifest_url or GET /claims/{id} for it), with links.
func listedClaim(c *dotlab.Claim) apiv1.ClaimView {
	short := *c
	short.Manifest = nil
	return apiv1.NewClaimView(&short)
}

// handleClaim is GET /claims/{id}, with its manifest; served from the read
// cache when it holds the claim (readcache.go).
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	return s.serveCached(w, cacheKey{cacheClaim, id}, id, func() ([]byte, string, bool, error) {
		c, err := s.store.FindClaim(r.Context(), id)
		if err != nil {
			return nil, "", false, err
		}
		b, err := s.claimJSON(c)
		return b, id, c.ID == id, err
	})
}

// claimExists returns nil when claim id exists (it is in the read cache, or
// the store finds it), else the store's error (404 not_found): claims are
// never deleted, so a cached claim exists.
func (s *Server) claimExists(r *http.Request, id string) error {
	if _, ok := s.cache.get(cacheKey{cacheClaim, id}); ok {
		return nil
	}
	_, err := s.store.FindClaim(r.Context(), id)
	return err
}

// writeClaim writes a claim view (claimJSON).
func (s *Server) writeClaim(w http.ResponseWriter, status int, c *dotlab.Claim) {
	b, err := s.claimJSON(c)
	if err != nil {
		s.logger.Error("encode response", "err", err)
		s.writeJSON(w, status, apiv1.NewClaimView(c))
		return
	}
	writeBody(w, status, "application/json", b)
}

// claimJSON encodes a claim view, with a final newline as writeJSON's. The
// manifest is encoded once per manifest (manifests never change once
// listed) and spliced in: re-encoding it by reflection on every read was a
// large share of a read's cost.
func (s *Server) claimJSON(c *dotlab.Claim) ([]byte, error) {
	b, err := json.Marshal(listedClaim(c))
	if err == nil && (c.Manifest == nil || len(b) < 2) {
		return append(b, '\n'), nil
	}
	if err != nil {
		return nil, err
	}
	mj, err := s.manifestJSON(c.ManifestHash, c.Manifest)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(mj)+16)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"manifest":`...)
	out = append(out, mj...)
	out = append(out, "}\n"...)
	return out, nil
}

// writeBody writes an encoded response body.
func writeBody(w http.ResponseWriter, status int, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	w.Write(b)
}

// manifestJSON returns the JSON encoding of a listed manifest, cached by its
// canonical hash (bounded by maxManifestJSONBytes).
func (s *Server) manifestJSON(hash string, m *dotlab.Manifest) ([]byte, error) {
	if b, ok := s.manifests.Get(hash); ok {
		return b, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	s.manifests.Put(hash, b, len(b))
	return b, nil
}

// maxManifestJSONBytes bounds the encoded-manifest cache.
const maxManifestJSONBytes = 32 << 20

// handleClaimManifest is GET /claims/{id}/manifest: the bytes as
// submitted; served from the read cache when it holds them.
func (s *Server) handleClaimManifest(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	return s.serveCached(w, cacheKey{cacheManifest, id}, id, func() ([]byte, string, bool, error) {
		raw, err := s.store.ClaimManifest(r.Context(), id)
		return raw, id, dotlab.ValidClaimID(id), err
	})
}

// handleClaimEvents is GET /claims/{id}/events?after=: the claim's state
// history as JSON (the same events the live stream sends as "state").
func (s *Server) handleClaimEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.FindClaim(r.Context(), id); err != nil {
		return err
	}
	after, err := queryInt(r, "after")
	if err != nil {
		return err
	}
	ev, err := s.store.ClaimEvents(r.Context(), id, after)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, apiv1.ClaimEventList{Events: ev})
	return nil
}

// handleClaims is GET /claims?state=&after=&limit=: one page of listings.
func (s *Server) handleClaims(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPage(r, "state")
	if err != nil {
		return err
	}
	cs, err := s.store.FindClaims(r.Context(), p)
	if err != nil {
		return err
	}
	page := apiv1.ClaimPage{Claims: make([]apiv1.ClaimView, 0, len(cs))}
	for _, c := range cs {
		page.Claims = append(page.Claims, listedClaim(c))
	}
	if len(cs) > 0 {
		page.Next = p.Next(len(cs), cs[len(cs)-1].ID)
	}
	s.writeJSON(w, http.StatusOK, page)
	return nil
}

// handleSummary is GET /summary?recent=: claim counts by state and the
// latest settled claims, as listings show them.
func (s *Server) handleSummary(w http.ResponseWriter, r *http.Request) error {
	recent, err := queryBounded(r, "recent", 10, 50)
	if err != nil {
		return err
	}
	sum, err := s.store.ClaimSummary(r.Context(), recent)
	if err != nil {
		return err
	}
	v := apiv1.SummaryView{Total: sum.Total, ClaimsByState: sum.ClaimsByState, RecentlySettled: make([]apiv1.ClaimView, 0, len(sum.RecentlySettled))}
	for _, c := range sum.RecentlySettled {
		v.RecentlySettled = append(v.RecentlySettled, listedClaim(c))
	}
	s.writeJSON(w, http.StatusOK, v)
	return nil
}
