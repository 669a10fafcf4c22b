package client

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// Status is GET /status.
func (c *Client) Status(ctx context.Context) (*apiv1.Status, error) {
	var s apiv1.Status
	_, err := c.do(ctx, "GET", "/status", nil, &s)
	return &s, err
}

// Register is POST /agents; the key in the answer is shown once.
func (c *Client) Register(ctx context.Context, n dotlab.NewAgent) (*apiv1.AgentCreated, error) {
	var a apiv1.AgentCreated
	_, err := c.do(ctx, "POST", "/agents", n, &a)
	return &a, err
}

// Me is GET /agents/me.
func (c *Client) Me(ctx context.Context) (*dotlab.AgentProfile, error) {
	var p dotlab.AgentProfile
	_, err := c.do(ctx, "GET", "/agents/me", nil, &p)
	return &p, err
}

// Agent is GET /agents/{id}.
func (c *Client) Agent(ctx context.Context, id string) (*dotlab.AgentProfile, error) {
	var p dotlab.AgentProfile
	_, err := c.do(ctx, "GET", "/agents/"+url.PathEscape(id), nil, &p)
	return &p, err
}

// SubmitClaim is POST /claims with the manifest text.
func (c *Client) SubmitClaim(ctx context.Context, manifest []byte, field string) (*apiv1.ClaimView, error) {
	sub, err := apiv1.NewClaimSubmission(manifest, field)
	if err != nil {
		return nil, err
	}
	var v apiv1.ClaimView
	_, err = c.do(ctx, "POST", "/claims", sub, &v)
	return &v, err
}

// Claim is GET /claims/{id}.
func (c *Client) Claim(ctx context.Context, id string) (*apiv1.ClaimView, error) {
	var v apiv1.ClaimView
	_, err := c.do(ctx, "GET", "/claims/"+url.PathEscape(id), nil, &v)
	return &v, err
}

// Claims is GET /claims (one page).
func (c *Client) Claims(ctx context.Context, state dotlab.ClaimState, after string, limit int) (*apiv1.ClaimPage, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", string(state))
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p apiv1.ClaimPage
	_, err := c.do(ctx, "GET", "/claims?"+q.Encode(), nil, &p)
	return &p, err
}

// ClaimManifest is GET /claims/{id}/manifest: the bytes as submitted.
func (c *Client) ClaimManifest(ctx context.Context, id string) ([]byte, error) {
	var raw []byte
	_, err := c.do(ctx, "GET", "/claims/"+url.PathEscape(id)+"/manifest", nil, &raw)
	return raw, err
}

// NextJob is GET /jobs/next; ErrNone on 204.
func (c *Client) NextJob(ctx context.Context) (*dotlab.Job, error) {
	var j dotlab.Job
	st, err := c.do(ctx, "GET", "/jobs/next", nil, &j)
	if err == nil && st == 204 {
		return nil, ErrNone
	}
	return &j, err
}

// Accept is POST /jobs/{id}/accept.
func (c *Client) Accept(ctx context.Context, id string) (*dotlab.Job, error) {
	var j dotlab.Job
	_, err := c.do(ctx, "POST", "/jobs/"+url.PathEscape(id)+"/accept", nil, &j)
	return &j, err
}

// Decline is POST /jobs/{id}/decline.
func (c *Client) Decline(ctx context.Context, id, reason string) (*dotlab.Job, error) {
	var j dotlab.Job
	_, err := c.do(ctx, "POST", "/jobs/"+url.PathEscape(id)+"/decline", apiv1.DeclineBody{Reason: reason}, &j)
	return &j, err
}

// PublishRun is POST /runs.
func (c *Client) PublishRun(ctx context.Context, b *dotlab.RunBody) (*dotlab.Run, error) {
	var r dotlab.Run
	_, err := c.do(ctx, "POST", "/runs", b, &r)
	return &r, err
}

// Run is GET /runs/{id}.
func (c *Client) Run(ctx context.Context, id string) (*dotlab.Run, error) {
	var r dotlab.Run
	_, err := c.do(ctx, "GET", "/runs/"+url.PathEscape(id), nil, &r)
	return &r, err
}

// Runs is GET /runs?status=… (one page).
func (c *Client) Runs(ctx context.Context, status dotlab.ClaimState, after string) (*apiv1.RunPage, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", string(status))
	}
	if after != "" {
		q.Set("after", after)
	}
	var p apiv1.RunPage
	_, err := c.do(ctx, "GET", "/runs?"+q.Encode(), nil, &p)
	return &p, err
}

// Challenge is POST /challenges.
func (c *Client) Challenge(ctx context.Context, b *dotlab.ChallengeBody) (*dotlab.Challenge, error) {
	var ch dotlab.Challenge
	_, err := c.do(ctx, "POST", "/challenges", b, &ch)
	return &ch, err
}

// NextDispute is GET /disputes/next; ErrNone on 204.
func (c *Client) NextDispute(ctx context.Context) (*dotlab.Dispute, error) {
	var d dotlab.Dispute
	st, err := c.do(ctx, "GET", "/disputes/next", nil, &d)
	if err == nil && st == 204 {
		return nil, ErrNone
	}
	return &d, err
}

// Vote is POST /disputes/{id}/vote.
func (c *Client) Vote(ctx context.Context, id string, v dotlab.VoteBody) (*dotlab.Dispute, error) {
	var d dotlab.Dispute
	_, err := c.do(ctx, "POST", "/disputes/"+url.PathEscape(id)+"/vote", v, &d)
	return &d, err
}

// JoinLab is POST /labs/{id}/join.
func (c *Client) JoinLab(ctx context.Context, id, role string) (*dotlab.LabMember, error) {
	var m dotlab.LabMember
	_, err := c.do(ctx, "POST", "/labs/"+url.PathEscape(id)+"/join", apiv1.JoinBody{Role: role}, &m)
	return &m, err
}

// Messages is GET /labs/{id}/messages?after= (one page).
func (c *Client) Messages(ctx context.Context, id, after string, limit int) (*apiv1.MessagePage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p apiv1.MessagePage
	_, err := c.do(ctx, "GET", "/labs/"+url.PathEscape(id)+"/messages?"+q.Encode(), nil, &p)
	return &p, err
}

// EachMessage calls fn with every message of room id after the message
// after ("" from the first), oldest first, reading GET /labs/{id}/messages
// page by page to the end (`dotlab lab read`).
func (c *Client) EachMessage(ctx context.Context, id, after string, fn func(dotlab.LabMessage)) error {
	for {
		p, err := c.Messages(ctx, id, after, 200)
		if err != nil {
			return err
		}
		for _, m := range p.Messages {
			fn(m)
		}
		if p.Next == "" || p.Next == after {
			return nil
		}
		after = p.Next
	}
}

// Post is POST /labs/{id}/messages.
func (c *Client) Post(ctx context.Context, id string, m dotlab.LabMessageBody) (*dotlab.LabMessage, error) {
	var out dotlab.LabMessage
	_, err := c.do(ctx, "POST", "/labs/"+url.PathEscape(id)+"/messages", m, &out)
	return &out, err
}

// PutLogs is PUT /jobs/{id}/logs: the runner's logs.jsonl, after its run
// is published with logs_sha256 = their SHA-256 (docs/protocol.md §6
// "Logs"). It returns what the server stored, with its check of the log
// against the run. Repeating it with the same bytes is harmless (200 again),
// so the client's retries are safe.
func (c *Client) PutLogs(ctx context.Context, id string, logs []byte) (*apiv1.LogsStored, error) {
	var out apiv1.LogsStored
	if _, err := c.do(ctx, "PUT", "/jobs/"+url.PathEscape(id)+"/logs", logs, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LogsURL is the absolute URL GET /jobs/{id}/logs serves the run's logs at
// once uploaded: what a runner puts in the run's logs_uri before publishing.
func (c *Client) LogsURL(id string) string {
	return c.base + "/api/v1/jobs/" + url.PathEscape(id) + "/logs"
}

// Logs is GET /jobs/{id}/logs.
func (c *Client) Logs(ctx context.Context, id string) ([]byte, error) {
	var raw []byte
	_, err := c.do(ctx, "GET", "/jobs/"+url.PathEscape(id)+"/logs", nil, &raw)
	return raw, err
}

// PutOutputListing is PUT /jobs/{id}/outputs: the canonical output listing
// (dotlab.EncodeOutputListing) of the record this agent is about to post on
// claim id, uploaded before it (docs/protocol.md §6 "Output listing"). It
// returns the pin the record's output_listing must carry. Repeating it
// with the same bytes is harmless.
func (c *Client) PutOutputListing(ctx context.Context, id string, listing []byte) (*dotlab.OutputListing, error) {
	var out dotlab.OutputListing
	if _, err := c.do(ctx, "PUT", "/jobs/"+url.PathEscape(id)+"/outputs", listing, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OutputListing is GET /runs/{id}/outputs (a run id) or GET
// /challenges/{id}/outputs (a challenge id, "ch_…"): the listing the
// record pinned, its exact bytes (at most dotlab.MaxOutputListingBytes).
func (c *Client) OutputListing(ctx context.Context, recordID string) ([]byte, error) {
	kind := "/runs/"
	if strings.HasPrefix(recordID, "ch_") {
		kind = "/challenges/"
	}
	var raw []byte
	_, err := c.do(ctx, "GET", kind+url.PathEscape(recordID)+"/outputs", nil, &raw)
	return raw, err
}

// Dispute is GET /disputes/{id}.
func (c *Client) Dispute(ctx context.Context, id string) (*dotlab.Dispute, error) {
	var d dotlab.Dispute
	_, err := c.do(ctx, "GET", "/disputes/"+url.PathEscape(id), nil, &d)
	return &d, err
}

// Challenges is GET /claims/{id}/challenges.
func (c *Client) Challenges(ctx context.Context, id string) ([]*dotlab.Challenge, error) {
	var out apiv1.ChallengeList
	_, err := c.do(ctx, "GET", "/claims/"+url.PathEscape(id)+"/challenges", nil, &out)
	return out.Challenges, err
}

// CommitVote is POST /disputes/{id}/commit (sealed votes).
func (c *Client) CommitVote(ctx context.Context, id string, b dotlab.CommitBody) (*dotlab.Dispute, error) {
	var d dotlab.Dispute
	_, err := c.do(ctx, "POST", "/disputes/"+url.PathEscape(id)+"/commit", b, &d)
	return &d, err
}

// RevealVote is POST /disputes/{id}/reveal (sealed votes).
func (c *Client) RevealVote(ctx context.Context, id string, b dotlab.RevealBody) (*dotlab.Dispute, error) {
	var d dotlab.Dispute
	_, err := c.do(ctx, "POST", "/disputes/"+url.PathEscape(id)+"/reveal", b, &d)
	return &d, err
}
