// Package client is the Go client of DotLab's /api/v1, shared by every agent
// command (runner, challenger, review, lab, claim, agent) and by the tests.
// It speaks the wire types of package apiv1 and imports no server package,
// so an agent binary links no server code.
//
// Retries follow docs/protocol.md §5: a 5xx is retried up to three times
// with exponential backoff, a 429 after its Retry-After, and a 401 stops at
// once. Every error the server returns comes back as a
// *dotlab.Error with the server's code and detail, so callers can switch on
// dotlab.ErrorCode(err).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// Client talks to one DotLab server.
type Client struct {
	base    string // e.g. http://127.0.0.1:8080 (no /api/v1)
	key     string
	http    *http.Client
	sleep   func(context.Context, time.Duration) error
	Retries int           // retries of a 5xx or 429 (default 3)
	Backoff time.Duration // first 5xx backoff, doubled each time (default 500 ms)
}

// New returns a client for server (a base URL like http://127.0.0.1:8080)
// authenticating with apiKey (empty for public calls).
func New(server, apiKey string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: give the server's base URL, e.g. http://127.0.0.1:8080", server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/api/v1")
	hc := &http.Client{Timeout: 60 * time.Second,
		// The API never redirects; following one would send the key to
		// wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Client{base: u.String(), key: apiKey, http: hc, sleep: sleepCtx, Retries: 3, Backoff: 500 * time.Millisecond}, nil
}

// WithKey returns a copy of c that authenticates with key.
func (c *Client) WithKey(key string) *Client {
	cp := *c
	cp.key = key
	return &cp
}

// Server returns the base URL.
func (c *Client) Server() string { return c.base }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// do sends a request and decodes a 2xx JSON answer into out (when not nil).
// It returns the status code; 204 leaves out untouched.
func (c *Client) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var payload []byte
	if body != nil {
		if b, ok := body.([]byte); ok {
			payload = b
		} else {
			var err error
			if payload, err = json.Marshal(body); err != nil {
				return 0, err
			}
		}
	}
	backoff := c.Backoff
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, c.base+"/api/v1"+path, bytes.NewReader(payload))
		if err != nil {
			return 0, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		res, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil || attempt >= c.Retries {
				return 0, fmt.Errorf("%s %s: %w", method, path, err)
			}
			if err := c.sleep(ctx, backoff); err != nil {
				return 0, err
			}
			backoff *= 2
			continue
		}
		data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
		res.Body.Close()
		if err != nil {
			return res.StatusCode, err
		}
		switch {
		case res.StatusCode >= 200 && res.StatusCode < 300:
			if out != nil && res.StatusCode != http.StatusNoContent {
				if raw, ok := out.(*[]byte); ok {
					*raw = data
				} else if err := json.Unmarshal(data, out); err != nil {
					return res.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
				}
			}
			return res.StatusCode, nil
		case res.StatusCode == http.StatusTooManyRequests && attempt < c.Retries:
			wait := time.Second
			if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			if err := c.sleep(ctx, wait); err != nil {
				return 0, err
			}
		case res.StatusCode >= 500 && attempt < c.Retries:
			if err := c.sleep(ctx, backoff); err != nil {
				return 0, err
			}
			backoff *= 2
		default:
			return res.StatusCode, apiError(res.StatusCode, data)
		}
	}
}

// apiError turns an error answer into a *dotlab.Error.
func apiError(status int, data []byte) error {
	var eb apiv1.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		return eb.Err()
	}
	return &dotlab.Error{Code: dotlab.EINTERNAL, Detail: []string{fmt.Sprintf("HTTP %d from the server", status)}}
}

// IsUnauthorized reports whether err is a 401: the key is missing, wrong or
// revoked; agents stop at once.
func IsUnauthorized(err error) bool { return dotlab.ErrorCode(err) == dotlab.EUNAUTHORIZED }

// ErrNone is returned by the Next… calls when the server answers 204.
var ErrNone = errors.New("nothing open right now (204)")
