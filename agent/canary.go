package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// Canary checks whether the hosts of claims' pinned inputs still serve the
// pinned bytes (docs/protocol.md "Canary"), from the agent's side: the
// server never fetches a stranger's URL. HTTP is the client it fetches
// with (the runner's fetch policy: runner.Policy.Client); MaxHash bounds
// the bytes hashed per URL (a larger file is reported serving on a 2xx
// answer, not hashed); Timeout bounds each URL.
type Canary struct {
	Agent   *Agent
	HTTP    *http.Client
	MaxHash int64
	Timeout time.Duration
}

// DefaultCanaryMaxHash is the bytes the canary hashes per URL by default
// (64 MiB).
const DefaultCanaryMaxHash = 64 << 20

// maxCanaryClaims bounds the settled claims one pass checks.
const maxCanaryClaims = 1000

// Once checks every settled claim (at most maxCanaryClaims) and reports
// each claim's URLs in one POST /claims/{id}/canary. It returns how many
// claims were reported; a claim whose report the server refuses (a rate
// limit) is skipped and logged.
func (c *Canary) Once(ctx context.Context) (int, error) {
	after, done := "", 0
	for n := 0; n < maxCanaryClaims; {
		page, err := c.Agent.Client.Claims(ctx, dotlab.StateSettled, after, 100)
		if err != nil {
			return done, err
		}
		for _, cv := range page.Claims {
			n++
			ok, err := c.Claim(ctx, cv.ID)
			if err != nil {
				c.Agent.logf("%s: canary: %v", cv.ID, err)
			}
			if ok {
				done++
			}
		}
		if page.Next == "" || page.Next <= after {
			break
		}
		after = page.Next
	}
	return done, nil
}

// Claim checks the pinned URLs of claimID and reports them; ok is false
// when the claim has none to check.
func (c *Canary) Claim(ctx context.Context, claimID string) (bool, error) {
	m, err := c.Agent.fetchManifest(ctx, claimID)
	if err != nil {
		return false, err
	}
	var reports []dotlab.CanaryReport
	seen := map[string]bool{}
	for _, p := range m.PinnedInputs() {
		if seen[p.URL] || !(strings.HasPrefix(p.URL, "http://") || strings.HasPrefix(p.URL, "https://")) {
			continue
		}
		seen[p.URL] = true
		reports = append(reports, c.Check(ctx, p))
	}
	if len(reports) == 0 {
		return false, nil
	}
	if _, err := c.Agent.Client.ReportCanary(ctx, claimID, reports); err != nil {
		return false, err
	}
	for _, r := range reports {
		c.Agent.logf("%s: canary: %s %s (%s)", claimID, r.Status, r.URL, r.Detail)
	}
	return true, nil
}

// Check fetches one pinned input: dead when it cannot be fetched or
// answers other than 2xx, different when its bytes hash to another
// SHA-256, serving when they hash to the pin (or, over MaxHash, when it
// answers 2xx: not hashed, said in the detail).
func (c *Canary) Check(ctx context.Context, p dotlab.PinnedInput) dotlab.CanaryReport {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep := dotlab.CanaryReport{URL: p.URL}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return dead(rep, err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	res, err := c.HTTP.Do(req)
	if err != nil {
		return dead(rep, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		rep.Status, rep.Detail = dotlab.CanaryDead, fmt.Sprintf("HTTP %d", res.StatusCode)
		return rep
	}
	limit := c.MaxHash
	if limit <= 0 {
		limit = DefaultCanaryMaxHash
	}
	if res.ContentLength > limit {
		rep.Status, rep.Detail = dotlab.CanaryServing, fmt.Sprintf("HTTP %d, %d bytes announced; not hashed (over %d bytes)", res.StatusCode, res.ContentLength, limit)
		return rep
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(res.Body, limit+1))
	switch {
	case err != nil:
		return dead(rep, err)
	case n > limit:
		rep.Status, rep.Detail = dotlab.CanaryServing, fmt.Sprintf("HTTP %d, over %d bytes; not hashed", res.StatusCode, limit)
	case hex.EncodeToString(h.Sum(nil)) == p.SHA256:
		rep.Status, rep.Detail = dotlab.CanaryServing, fmt.Sprintf("sha256 verified, %d bytes", n)
	default:
		rep.Status, rep.Detail = dotlab.CanaryDifferent, "sha256 "+hex.EncodeToString(h.Sum(nil))
	}
	return rep
}

// dead is rep as dead for err, the detail a short form of why (no URL,
// which the report names already).
func dead(rep dotlab.CanaryReport, err error) dotlab.CanaryReport {
	detail := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		detail = "timed out"
	} else if i := strings.LastIndex(detail, ": "); i >= 0 {
		detail = detail[i+2:]
	}
	if len(detail) > dotlab.MaxCanaryDetail {
		detail = detail[:dotlab.MaxCanaryDetail]
	}
	rep.Status, rep.Detail = dotlab.CanaryDead, detail
	return rep
}
