package client

import (
	"context"
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

// LogClaim is GET /log/claims/{id}?tree_size=N: the claim's entries with
// inclusion proofs in the tree of size treeSize.
func (c *Client) LogClaim(ctx context.Context, id string, treeSize int64) (*apiv1.LogClaim, error) {
	var out apiv1.LogClaim
	_, err := c.do(ctx, "GET", "/log/claims/"+url.PathEscape(id)+"?tree_size="+strconv.FormatInt(treeSize, 10), nil, &out)
	return &out, err
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
