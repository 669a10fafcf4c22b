package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/dotlab/dotlab/apiv1"
)

// Log is GET /log: the log's origin, verifier key and signed checkpoint.
func (c *Client) Log(ctx context.Context) (*apiv1.LogInfo, error) {
	var out apiv1.LogInfo
	_, err := c.do(ctx, "GET", "/log", nil, &out)
	return &out, err
}

// LogClaimPage is GET /log/claims/{id}?tree_size=N&from=I: one page of
// the claim's entries with inclusion proofs in the tree of size treeSize,
// from log index from on (apiv1.LogClaim: at most 1 MiB).
func (c *Client) LogClaimPage(ctx context.Context, id string, treeSize, from int64) (*apiv1.LogClaim, error) {
	var out apiv1.LogClaim
	_, err := c.do(ctx, "GET", "/log/claims/"+url.PathEscape(id)+"?tree_size="+strconv.FormatInt(treeSize, 10)+"&from="+strconv.FormatInt(from, 10), nil, &out)
	return &out, err
}

// EachLogClaimPage reads the claim's entries in the tree of size treeSize
// page by page and calls fn with each, so that memory holds one page
// whatever the size of the claim. A page whose next index does not move
// forward is an error (a server must not make the reader loop).
func (c *Client) EachLogClaimPage(ctx context.Context, id string, treeSize int64, fn func(*apiv1.LogClaim) error) error {
	from := int64(0)
	for {
		p, err := c.LogClaimPage(ctx, id, treeSize, from)
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
		if p.Next == "" {
			return nil
		}
		if p.NextFrom <= from || len(p.Entries) == 0 {
			return fmt.Errorf("log entries of %s: the page from %d names next_from %d: the server does not move forward", id, from, p.NextFrom)
		}
		from = p.NextFrom
	}
}

// LogEntry is GET /log/entries/{type}/{id}?tree_size=N.
func (c *Client) LogEntry(ctx context.Context, typ, id string, treeSize int64) (*apiv1.LogEntry, error) {
	var out apiv1.LogEntry
	_, err := c.do(ctx, "GET", "/log/entries/"+url.PathEscape(typ)+"/"+url.PathEscape(id)+"?tree_size="+strconv.FormatInt(treeSize, 10), nil, &out)
	return &out, err
}

// LogConsistency is GET /log/consistency?from=M&to=N.
func (c *Client) LogConsistency(ctx context.Context, from, to int64) (*apiv1.LogConsistency, error) {
	var out apiv1.LogConsistency
	_, err := c.do(ctx, "GET", "/log/consistency?from="+strconv.FormatInt(from, 10)+"&to="+strconv.FormatInt(to, 10), nil, &out)
	return &out, err
}
