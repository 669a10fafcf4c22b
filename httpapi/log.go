package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

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

// handleLog is GET /log: origin, verifier key, the signed checkpoint with
// its cosignatures and the latest cosigned checkpoints.
func (s *Server) handleLog(w http.ResponseWriter, r *http.Request) error {
	wit, err := s.log.Witnessed(r.Context())
	if err != nil {
		return err
	}
	cp := wit.Checkpoint
	w.Header().Set("Cache-Control", "no-cache")
	s.writeJSON(w, http.StatusOK, apiv1.LogInfo{Origin: s.log.Origin(), VerifierKey: s.log.VerifierKey(), Size: cp.Size,
		RootHash: b64(cp.Root), Checkpoint: string(wit.Note), TilesPrefix: translog.Prefix, CosignedCheckpoints: wit.Cosigned})
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
// entry and inclusion proof. An entry still pending (its record committed,
// the sequencer not done) is waited for, at most pendingWait.
func (s *Server) handleLogEntry(w http.ResponseWriter, r *http.Request) error {
	typ := tlogfmt.EntryType(r.PathValue("type"))
	if !typ.Valid() {
		return dotlab.Errorf(dotlab.ENOTFOUND, "no entry type %q: the types are claim, offer, run, challenge, vote, settlement, message, envelope", typ)
	}
	e, err := s.lookupEntry(r, typ, r.PathValue("id"))
	if err != nil {
		return err
	}
	size, err := s.treeSize(r)
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

// pendingWait bounds how long a request waits for a pending entry.
const pendingWait = 2 * time.Second

// lookupEntry is the log's entry of record typ/id, waiting (pendingWait)
// while it is pending; ENOTFOUND naming the state when it still is.
func (s *Server) lookupEntry(r *http.Request, typ tlogfmt.EntryType, id string) (translog.Entry, error) {
	e, err := s.log.Lookup(r.Context(), typ, id)
	if err != nil || !e.Pending {
		return e, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), pendingWait)
	defer cancel()
	if err := s.log.Await(ctx); err == nil {
		if e, err = s.log.Lookup(r.Context(), typ, id); err != nil || !e.Pending {
			return e, err
		}
	}
	return e, dotlab.Errorf(dotlab.ENOTFOUND, "%s %s is pending: written with its record, not yet in the log's tree; ask again in a few seconds", typ, id)
}

// handleLogClaim is GET /log/claims/{id}?tree_size=N&from=I&limit=L: one
// page of the claim's entries below N from log index I on, each with its
// inclusion proof, at most L entries (default and most
// apiv1.LogClaimPageEntries) and apiv1.LogClaimPageBytes of JSON (one
// entry more than fits is left to the next page), and the next page's
// link. Without from and limit it is the first page: a client that reads
// one answer sees the first entries and a next link.
func (s *Server) handleLogClaim(w http.ResponseWriter, r *http.Request) error {
	size, err := s.treeSize(r)
	if err != nil {
		return err
	}
	from, err := queryInt(r, "from")
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	if limit > apiv1.LogClaimPageEntries {
		return dotlab.Errorf(dotlab.EINVALID, "limit: at most %d entries per page", apiv1.LogClaimPageEntries)
	}
	if limit == 0 {
		limit = apiv1.LogClaimPageEntries
	}
	root, err := s.log.TreeHash(r.Context(), size)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	// One entry more than the page tells whether there is a next page.
	es, err := s.log.ClaimEntriesPage(r.Context(), id, size, from, int(limit)+1)
	if err != nil {
		return err
	}
	out := apiv1.LogClaim{ClaimID: id, TreeSize: size, RootHash: b64(root), Entries: []apiv1.LogEntry{}}
	page := es[:min(len(es), int(limit))]
	idx := make([]int64, len(page))
	for i, e := range page {
		idx[i] = e.Index
	}
	proofs, err := s.log.InclusionProofs(r.Context(), idx, size)
	if err != nil {
		return err
	}
	used := 512 // the envelope and the next link
	for i, e := range page {
		le := apiv1.LogEntry{Index: e.Index, Type: string(e.Type), ID: e.ID, Entry: string(e.Data), LeafHash: b64(tlog.RecordHash(e.Data)),
			TreeSize: size, InclusionProof: b64s(proofs[i])}
		b, err := json.Marshal(le)
		if err != nil {
			return err
		}
		if used+len(b)+1 > apiv1.LogClaimPageBytes && i > 0 {
			break
		}
		used += len(b) + 1
		out.Entries = append(out.Entries, le)
	}
	if n := len(out.Entries); n < len(es) {
		out.NextFrom = es[n].Index
		out.Next = fmt.Sprintf("/api/v1/log/claims/%s?tree_size=%d&from=%d&limit=%d", url.PathEscape(id), size, out.NextFrom, limit)
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
