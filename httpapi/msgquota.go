package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
)

// MessageQuota bounds lab room messages (POST /labs/{id}/messages) in
// fixed windows of Window: PerAgent messages by one agent over all rooms,
// PerRoom messages in one room by all its members
// (docs/threat-model.md "Spam and denial of service": free agents must not
// flood a room until its log costs seconds to read). Zero disables a
// quota. The counts are this process's: behind N server processes a room
// takes up to N times PerRoom.
type MessageQuota struct {
	PerAgent, PerRoom int
	Window            time.Duration
}

// DefaultMessageQuota is 120 messages an hour per agent and 600 an hour
// per room: an honest job posts a handful (claim, handoffs, findings).
func DefaultMessageQuota() MessageQuota {
	return MessageQuota{PerAgent: 120, PerRoom: 600, Window: time.Hour}
}

// msgCounter counts messages in the current window. An agent's message
// counts when it is asked for (its own quota, whatever the answer); a
// room's only once the store accepted it, so that strangers refused by
// the room cannot use up its members' quota.
type msgCounter struct {
	q      MessageQuota
	mu     sync.Mutex
	window time.Time // start of the current window
	agents map[string]int
	rooms  map[string]int
}

func newMsgCounter(q MessageQuota) *msgCounter {
	if q.Window <= 0 {
		q.Window = time.Hour
	}
	return &msgCounter{q: q, agents: map[string]int{}, rooms: map[string]int{}}
}

// roll starts a new window when now is past the current one; mu is held.
func (c *msgCounter) roll(now time.Time) {
	if w := now.Truncate(c.q.Window); !w.Equal(c.window) {
		c.window = w
		clear(c.agents)
		clear(c.rooms)
	}
}

// take charges agentID one message to room, or returns a 429 rate_limited
// error naming the quota and when the window resets (Retry-After set).
func (c *msgCounter) take(w http.ResponseWriter, now time.Time, agentID, room string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roll(now)
	reset := c.window.Add(c.q.Window)
	refuse := func(what string, n int, flag string) error {
		w.Header().Set("Retry-After", strconv.Itoa(int(reset.Sub(now).Seconds())+1))
		return dotlab.Errorf(dotlab.ERATELIMITED, "%s: at most %d lab messages per %s (%s); the quota resets at %s",
			what, n, c.q.Window, flag, reset.UTC().Format(time.RFC3339))
	}
	if c.q.PerRoom > 0 && c.rooms[room] >= c.q.PerRoom {
		return refuse(fmt.Sprintf("room %s", room), c.q.PerRoom, "--msg-room")
	}
	if c.q.PerAgent > 0 {
		if c.agents[agentID] >= c.q.PerAgent {
			return refuse("this agent", c.q.PerAgent, "--msg-agent")
		}
		c.agents[agentID]++
	}
	return nil
}

// posted counts an accepted message against its room.
func (c *msgCounter) posted(now time.Time, room string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roll(now)
	c.rooms[room]++
}
