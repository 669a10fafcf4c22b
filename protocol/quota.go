package protocol

import (
	"sync"
	"time"

	"github.com/dotlab/dotlab"
)

// MessageQuota bounds lab room messages (the post step) in fixed windows of
// Window, aligned to the clock: PerAgent messages by one agent over all
// rooms, PerRoom messages in one room by all its members
// (docs/threat-model.md "Spam and denial of service": free agents must not
// flood a room until its log costs seconds to read). Zero or negative
// disables a quota. The counts are this process's: behind N server
// processes a room takes up to N times PerRoom.
type MessageQuota struct {
	PerAgent, PerRoom int
	Window            time.Duration // default an hour
}

// DefaultMessageQuota is 120 messages an hour per agent and 600 an hour
// per room: an honest job posts a handful (claim, handoffs, findings).
func DefaultMessageQuota() MessageQuota {
	return MessageQuota{PerAgent: 120, PerRoom: 600, Window: time.Hour}
}

// window is q's window length (an hour when unset).
func (q MessageQuota) window() time.Duration {
	if q.Window <= 0 {
		return time.Hour
	}
	return q.Window
}

// Reset is when the window holding now ends and the quotas start again.
func (q MessageQuota) Reset(now time.Time) time.Time {
	return now.Truncate(q.window()).Add(q.window())
}

// msgCounter counts messages in the current window. An agent's message
// counts when it is asked for (its own quota, whatever the answer); a
// room's only once the store accepted it, so that strangers refused by
// the room cannot use up its members' quota. A nil counter takes no quota.
type msgCounter struct {
	q      MessageQuota
	mu     sync.Mutex
	window time.Time // start of the current window
	agents map[string]int
	rooms  map[string]int
}

// newMsgCounter counts for q; nil when q takes no quota.
func newMsgCounter(q MessageQuota) *msgCounter {
	if q.PerAgent <= 0 && q.PerRoom <= 0 {
		return nil
	}
	q.Window = q.window()
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

// take charges agentID one message to room, or returns ERATELIMITED naming
// the quota (and the `dotlab serve` flag that sets it) and when the window
// resets (MessageQuota.Reset).
func (c *msgCounter) take(now time.Time, agentID, room string) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roll(now)
	refuse := func(what string, n int, setting string) error {
		return dotlab.Errorf(dotlab.ERATELIMITED, "%s: at most %d lab messages per %s (%s); the quota resets at %s",
			what, n, c.q.Window, setting, c.q.Reset(now).UTC().Format(time.RFC3339))
	}
	if c.q.PerRoom > 0 && c.rooms[room] >= c.q.PerRoom {
		return refuse("room "+room, c.q.PerRoom, "the per-room message quota, --msg-room")
	}
	if c.q.PerAgent > 0 {
		if c.agents[agentID] >= c.q.PerAgent {
			return refuse("this agent", c.q.PerAgent, "the per-agent message quota, --msg-agent")
		}
		c.agents[agentID]++
	}
	return nil
}

// posted counts an accepted message against its room.
func (c *msgCounter) posted(now time.Time, room string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roll(now)
	c.rooms[room]++
}
