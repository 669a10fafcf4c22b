package dotlab

import "time"

// PinnedInput is one input a manifest pins by SHA-256 that a runner fetches
// from a URL: a dataset, a helper, a pinned download or the code archive
// (docs/protocol.md "Input archive"). Key is its input_hashes key
// (the dataset's name, "helper:<name>", "download:<name>", or
// "code.archive").
type PinnedInput struct {
	Key    string
	URL    string
	SHA256 string
}

// CodeArchiveInputKey names the code archive among PinnedInputs.
const CodeArchiveInputKey = "code.archive"

// PinnedInputs lists every input m pins by URL and SHA-256, in manifest
// order: datasets, helpers, downloads, then the code archive.
func (m *Manifest) PinnedInputs() []PinnedInput {
	var out []PinnedInput
	for _, d := range m.Datasets {
		out = append(out, PinnedInput{d.Name, d.URL, d.SHA256})
	}
	for _, h := range m.Helpers {
		out = append(out, PinnedInput{HelperInputKey(h.Name), h.URL, h.SHA256})
	}
	for _, d := range m.Downloads {
		out = append(out, PinnedInput{DownloadInputKey(d.Name), d.URL, d.SHA256})
	}
	if a := m.Code.Archive; a != nil {
		out = append(out, PinnedInput{CodeArchiveInputKey, a.URL, a.SHA256})
	}
	return out
}

// Pins reports whether m pins an input with this SHA-256 (64 lowercase hex).
func (m *Manifest) Pins(sha256 string) bool {
	for _, p := range m.PinnedInputs() {
		if p.SHA256 == sha256 {
			return true
		}
	}
	return false
}

// ArchivedInput is the answer to an upload into the input archive (PUT
// /claims/{id}/inputs/{sha256}): the blob's SHA-256, its size in bytes,
// and whether this upload stored it (false: the archive held it already).
type ArchivedInput struct {
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	Stored bool   `json:"stored"`
}

// Canary statuses of one pinned URL (POST /claims/{id}/canary): the host
// serves the pinned bytes, cannot be fetched (connection refused, DNS
// failure, 4xx/5xx), or serves other bytes.
const (
	CanaryServing   = "serving"
	CanaryDead      = "dead"
	CanaryDifferent = "different"
)

// CanaryReport is one agent's check of one pinned URL of a claim: Status
// is CanaryServing, CanaryDead or CanaryDifferent; Detail says why (at
// most MaxCanaryDetail bytes: "HTTP 404", "sha256 <hex>", "HEAD 200,
// 12345 bytes announced").
type CanaryReport struct {
	URL        string    `json:"url"`
	Status     string    `json:"status"`
	Detail     string    `json:"detail,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	ReportedAt time.Time `json:"reported_at,omitzero"`
}

// MaxCanaryDetail bounds CanaryReport.Detail (bytes).
const MaxCanaryDetail = 200
