package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Event is one live event of a lab room (docs/protocol.md §9): Kind
// "message" (Data is a dotlab.LabMessage) or "state" (a dotlab.ClaimEvent);
// ID is the resume cursor "M.E" (apiv1.Cursor).
type Event struct {
	ID   string
	Kind string
	Data []byte
}

// Follow streams a room's events (GET /labs/{id}/events) to fn from cursor
// ("" = from the start), reconnecting after a drop with the last cursor so
// that nothing is lost or repeated, until ctx ends or fn returns an error.
func (c *Client) Follow(ctx context.Context, claimID, cursor string, fn func(Event) error) error {
	backoff := 500 * time.Millisecond
	for {
		err := c.stream(ctx, claimID, &cursor, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var stop stopErr
		if errors.As(err, &stop) {
			return stop.err
		}
		if err := c.sleep(ctx, backoff); err != nil {
			return err
		}
		if backoff < 10*time.Second {
			backoff *= 2
		}
	}
}

type stopErr struct{ err error }

func (e stopErr) Error() string { return e.err.Error() }

func (c *Client) stream(ctx context.Context, claimID string, cursor *string, fn func(Event) error) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/labs/"+url.PathEscape(claimID)+"/events", nil)
	if err != nil {
		return stopErr{err}
	}
	if *cursor != "" {
		req.Header.Set("Last-Event-ID", *cursor)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := (&http.Client{}).Do(req) // no overall timeout on a stream
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		data := make([]byte, 4096)
		n, _ := res.Body.Read(data)
		err := apiError(res.StatusCode, data[:n])
		if res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests {
			return stopErr{err}
		}
		return err
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Data != nil {
				if ev.ID != "" {
					*cursor = ev.ID
				}
				if err := fn(ev); err != nil {
					return stopErr{err}
				}
			}
			ev = Event{}
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = []byte(line[6:])
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("stream of %s ended", claimID)
}
