package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// InputArchive is claim claimID's part of the server's input archive
// (GET, HEAD and PUT /claims/{id}/inputs/{sha256}; docs/protocol.md
// "Input archive"), as runner.InputArchive wants it. Open's bytes are not
// checked here: the runner verifies them against the pin.
func (c *Client) InputArchive(claimID string) *InputArchive {
	return &InputArchive{c: c, claimID: claimID}
}

// InputArchive is Client.InputArchive's result.
type InputArchive struct {
	c       *Client
	claimID string
}

func (a *InputArchive) request(ctx context.Context, method, sum string, body io.Reader, size int64) (*http.Response, error) {
	u := a.c.base + apiv1.InputURL(url.PathEscape(a.claimID), url.PathEscape(sum))
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if a.c.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.c.key)
	}
	res, err := a.c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if res.StatusCode/100 != 2 {
		defer res.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		if res.StatusCode == http.StatusNotFound && len(data) == 0 { // HEAD: no body
			return nil, &dotlab.Error{Code: dotlab.ENOTFOUND, Detail: []string{"the archive does not hold sha256 " + sum}}
		}
		return nil, apiError(res.StatusCode, data)
	}
	return res, nil
}

// Open is GET /claims/{id}/inputs/{sha256}: the archived bytes and their
// announced size (-1 when not announced).
func (a *InputArchive) Open(ctx context.Context, sum string) (io.ReadCloser, int64, error) {
	res, err := a.request(ctx, http.MethodGet, sum, nil, 0)
	if err != nil {
		return nil, 0, err
	}
	n, perr := strconv.ParseInt(res.Header.Get("Content-Length"), 10, 64)
	if perr != nil {
		n = -1
	}
	return res.Body, n, nil
}

// Has is HEAD /claims/{id}/inputs/{sha256}: false on 404.
func (a *InputArchive) Has(ctx context.Context, sum string) (bool, error) {
	res, err := a.request(ctx, http.MethodHead, sum, nil, 0)
	if dotlab.ErrorCode(err) == dotlab.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	res.Body.Close()
	return true, nil
}

// Put is PUT /claims/{id}/inputs/{sha256} with size bytes of body.
func (a *InputArchive) Put(ctx context.Context, sum string, body io.Reader, size int64) error {
	res, err := a.request(ctx, http.MethodPut, sum, body, size)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// ReportCanary is POST /claims/{id}/canary: this agent's checks of the
// claim's pinned URLs; it returns the latest report on each URL.
func (c *Client) ReportCanary(ctx context.Context, claimID string, reports []dotlab.CanaryReport) ([]dotlab.CanaryReport, error) {
	var out apiv1.CanaryList
	if _, err := c.do(ctx, "POST", "/claims/"+url.PathEscape(claimID)+"/canary", apiv1.CanaryBody{Reports: reports}, &out); err != nil {
		return nil, err
	}
	return out.Reports, nil
}

// Canary is GET /claims/{id}/canary.
func (c *Client) Canary(ctx context.Context, claimID string) ([]dotlab.CanaryReport, error) {
	var out apiv1.CanaryList
	_, err := c.do(ctx, "GET", "/claims/"+url.PathEscape(claimID)+"/canary", nil, &out)
	return out.Reports, err
}
