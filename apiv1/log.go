package apiv1

// The transparency log's JSON API (docs/verification.md "API"). Hashes are
// standard base64 of 32 bytes, as in c2sp.org/tlog-checkpoint; entries are
// the logged bytes (RFC 8785 JSON, package tlogfmt) as a JSON string.

// LogInfo is GET /log: the log's identity and its current signed
// checkpoint, and where its c2sp.org/tlog-tiles resources are served.
type LogInfo struct {
	Origin      string `json:"origin"`
	VerifierKey string `json:"verifier_key"` // golang.org/x/mod/sumdb/note verifier key
	Size        int64  `json:"size"`
	RootHash    string `json:"root_hash"`
	Checkpoint  string `json:"checkpoint"`   // the signed note, as served at TilesPrefix + "checkpoint"
	TilesPrefix string `json:"tiles_prefix"` // "/log/"
	// CosignedCheckpoints are the checkpoints witnesses cosigned
	// (c2sp.org/tlog-cosignature), one signed note per tree size with the
	// log's signature and every cosignature of that size, largest first
	// (absent when no witness cosigned). A verifier checks them with the
	// witness keys it was given, never with keys this server names.
	CosignedCheckpoints []string `json:"cosigned_checkpoints,omitempty"`
}

// LogEntry is one logged record with its RFC 6962 inclusion proof in the
// tree of size TreeSize (GET /log/entries/{type}/{id}; within LogClaim).
type LogEntry struct {
	Index          int64    `json:"index"`
	Type           string   `json:"type"`
	ID             string   `json:"id"`
	Entry          string   `json:"entry"`     // the entry exactly as logged
	LeafHash       string   `json:"leaf_hash"` // SHA-256(0x00 || entry)
	TreeSize       int64    `json:"tree_size"`
	InclusionProof []string `json:"inclusion_proof"`
}

// LogClaim is GET /log/claims/{id}: one page of the entries of a claim's
// records below TreeSize, in log order, from log index ?from= on (default
// 0), each with its inclusion proof, and the root hash of that tree. A
// page holds at most ?limit= entries (default and most LogClaimPageEntries)
// and at most LogClaimPageBytes of JSON; Next, when set, is the path and
// query of the next page (same tree size, NextFrom the log index to go on
// from) and is absent on the last page.
type LogClaim struct {
	ClaimID  string     `json:"claim_id"`
	TreeSize int64      `json:"tree_size"`
	RootHash string     `json:"root_hash"`
	Entries  []LogEntry `json:"entries"`
	Next     string     `json:"next,omitempty"`
	NextFrom int64      `json:"next_from,omitempty"`
}

// Bounds of one page of GET /log/claims/{id} (docs/threat-model.md
// "Spam and denial of service": one answer costs the same whatever the
// size of the claim's room).
const (
	LogClaimPageEntries = 128
	LogClaimPageBytes   = 1 << 20
)

// LogConsistency is GET /log/consistency?from=M&to=N: the RFC 6962
// consistency proof from the tree of size From to the tree of size To.
type LogConsistency struct {
	From  int64    `json:"from"`
	To    int64    `json:"to"`
	Proof []string `json:"proof"`
}
