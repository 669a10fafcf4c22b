package web

import (
	"context"
	"encoding/base64"
	"net/url"
	"strconv"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
)

// logRef is where a record stands in the transparency log, for the claim
// and run pages (docs/verification.md): its entry index, the checkpoint it
// is included in and the URL of its inclusion proof.
type logRef struct {
	Origin   string
	Index    int64
	Size     int64  // the checkpoint's tree size
	Root     string // the checkpoint's root hash, base64
	ProofURL string // /api/v1/log/entries/{type}/{id}?tree_size=Size
	Verify   string // the command that checks it: dotlab verify ID
	Missing  bool   // the server keeps a log, but this record has no entry
	Pending  bool   // the entry is written, not yet integrated (no index yet)
}

// logRef returns the log entry of the record typ/id with the current
// checkpoint; nil when the server keeps no log, Missing when it has no
// entry for the record (a record older than the log), Pending while the
// log's sequencer has not integrated it (a page does not wait for it).
func (h *Handler) logRef(ctx context.Context, typ tlogfmt.EntryType, id, subject string) (*logRef, error) {
	if h.log == nil {
		return nil, nil
	}
	e, err := h.log.Lookup(ctx, typ, id)
	if dotlab.ErrorCode(err) == dotlab.ENOTFOUND {
		return &logRef{Missing: true}, nil
	} else if err != nil {
		return nil, err
	}
	if e.Pending {
		return &logRef{Pending: true, Verify: "dotlab verify " + subject}, nil
	}
	cp, _, err := h.log.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	size := strconv.FormatInt(cp.Size, 10)
	return &logRef{Origin: cp.Origin, Index: e.Index, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Root[:]),
		ProofURL: "/api/v1/log/entries/" + string(typ) + "/" + url.PathEscape(id) + "?tree_size=" + size, Verify: "dotlab verify " + subject}, nil
}
