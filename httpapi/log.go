package httpapi

import (
	"encoding/base64"
	"net/http"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
	"golang.org/x/mod/sumdb/tlog"
)

// logRoutes registers the transparency log's routes (docs/verification.md
// "API" and "Served resources"): its JSON API under /api/v1/log and its
// c2sp.org/tlog-tiles resources under /log/. Without a log (Config.Log
// nil) neither exists and both answer 404.
func (s *Server) logRoutes(api func(string, handlerFunc)) {
	if s.log == nil {
		return
	}
	api("GET /api/v1/log", s.handleLog)
	api("GET /api/v1/log/entries/{type}/{id}", s.handleLogEntry)
	api("GET /api/v1/log/claims/{id}", s.handleLogClaim)
	api("GET /api/v1/log/consistency", s.handleLogConsistency)
	for _, rt := range s.log.Routes() {
		api(rt.Pattern, rt.Handle)
	}
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

func b64s[H ~[tlog.HashSize]byte](hs []H) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

// handleLog is GET /log: origin, verifier key and the signed checkpoint.
func (s *Server) handleLog(w http.ResponseWriter, r *http.Request) error {
	cp, signed, err := s.log.Checkpoint(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-cache")
	s.writeJSON(w, http.StatusOK, apiv1.LogInfo{Origin: s.log.Origin(), VerifierKey: s.log.VerifierKey(), Size: cp.Size,
		RootHash: b64(cp.Root), Checkpoint: string(signed), TilesPrefix: translog.Prefix})
	return nil
}

// treeSize reads ?tree_size= (1 to the current size), giving the current
// size when it is absent.
func (s *Server) treeSize(r *http.Request) (int64, error) {
	n, err := queryInt(r, "tree_size")
	if err != nil || n > 0 {
		return n, err
	}
	if n, err = s.log.Size(r.Context()); err == nil && n == 0 {
		return 0, dotlab.Errorf(dotlab.ENOTFOUND, "the log is empty")
	}
	return n, err
}

// logEntry returns e with its inclusion proof in the tree of size size.
func (s *Server) logEntry(r *http.Request, e translog.Entry, size int64) (apiv1.LogEntry, error) {
	p, err := s.log.InclusionProof(r.Context(), e.Index, size)
	if err != nil {
		return apiv1.LogEntry{}, err
	}
	return apiv1.LogEntry{Index: e.Index, Type: string(e.Type), ID: e.ID, Entry: string(e.Data), LeafHash: b64(tlog.RecordHash(e.Data)),
		TreeSize: size, InclusionProof: b64s(p)}, nil
}

// handleLogEntry is GET /log/entries/{type}/{id}?tree_size=N: a record's
// entry and inclusion proof.
func (s *Server) handleLogEntry(w http.ResponseWriter, r *http.Request) error {
	typ := tlogfmt.EntryType(r.PathValue("type"))
	if !typ.Valid() {
		return dotlab.Errorf(dotlab.ENOTFOUND, "no entry type %q: the types are claim, offer, run, challenge, vote, settlement, message, envelope", typ)
	}
	size, err := s.treeSize(r)
	if err != nil {
		return err
	}
	e, err := s.log.Lookup(r.Context(), typ, r.PathValue("id"))
	if err != nil {
		return err
	}
	if e.Index >= size {
		return dotlab.Errorf(dotlab.ENOTFOUND, "%s %s is entry %d, not in the tree of size %d: ask with a later tree_size", typ, e.ID, e.Index, size)
	}
	out, err := s.logEntry(r, e, size)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// handleLogClaim is GET /log/claims/{id}?tree_size=N: every entry of the
// claim below N with its inclusion proof.
func (s *Server) handleLogClaim(w http.ResponseWriter, r *http.Request) error {
	size, err := s.treeSize(r)
	if err != nil {
		return err
	}
	root, err := s.log.TreeHash(r.Context(), size)
	if err != nil {
		return err
	}
	es, err := s.log.ClaimEntries(r.Context(), r.PathValue("id"), size)
	if err != nil {
		return err
	}
	out := apiv1.LogClaim{ClaimID: r.PathValue("id"), TreeSize: size, RootHash: b64(root), Entries: []apiv1.LogEntry{}}
	for _, e := range es {
		le, err := s.logEntry(r, e, size)
		if err != nil {
			return err
		}
		out.Entries = append(out.Entries, le)
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// handleLogConsistency is GET /log/consistency?from=M&to=N.
func (s *Server) handleLogConsistency(w http.ResponseWriter, r *http.Request) error {
	from, err := queryInt(r, "from")
	if err != nil {
		return err
	}
	to, err := queryInt(r, "to")
	if err != nil {
		return err
	}
	p, err := s.log.ConsistencyProof(r.Context(), from, to)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, apiv1.LogConsistency{From: from, To: to, Proof: b64s(p)})
	return nil
}

// statusLog is the log's entry in GET /status, nil without a log.
func (s *Server) statusLog() *apiv1.StatusLog {
	if s.log == nil {
		return nil
	}
	return &apiv1.StatusLog{Origin: s.log.Origin(), VerifierKey: s.log.VerifierKey(), CheckpointURL: translog.Prefix + "checkpoint", APIURL: "/api/v1/log"}
}
