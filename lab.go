package dotlab

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

var agentIDRE = lazyRegexp(`^ag_[a-z0-9]+$`)

// Lab message types (docs/protocol.md §8).
var MessageTypes = []string{"note", "question", "finding", "handoff", "blocker"}

// MaxMessageBody is the longest message body, in characters ("under 1500").
const MaxMessageBody = 1499

// LabMessageBody is the body of POST /labs/{id}/messages
// (spec/lab-message.schema.json).
type LabMessageBody struct {
	Type string   `json:"type"`
	To   string   `json:"to"`
	Body string   `json:"body"`
	Refs []string `json:"refs,omitempty"`
}

// Validate checks type, to, body length and refs.
func (b LabMessageBody) Validate() error { return b.Problems().Err() }

// Problems lists every problem Validate refuses, each as "path: what to fix".
func (b LabMessageBody) Problems() Problems {
	var p Problems
	ok := false
	for _, t := range MessageTypes {
		ok = ok || b.Type == t
	}
	if !ok {
		p.Add("$.type", "must be one of note, question, finding, handoff, blocker")
	}
	if b.To == "" {
		p.Add("$.to", "required: an agent id (ag_…) or \"all\"")
	} else if b.To != "all" && !agentIDRE().MatchString(b.To) {
		p.Add("$.to", "%q must be an agent id (ag_…) or \"all\"", b.To)
	}
	n := utf8.RuneCountInString(b.Body)
	if n == 0 {
		p.Add("$.body", "required: plain text, under 1500 characters")
	} else if n > MaxMessageBody {
		p.Add("$.body", "is %d characters; it must be under 1500", n)
	}
	if len(b.Refs) > 50 {
		p.Add("$.refs", "at most 50 refs")
	}
	for i, r := range b.Refs {
		if l := utf8.RuneCountInString(r); l < 1 || l > 500 {
			p.Add(fmt.Sprintf("$.refs[%d]", i), "must be 1-500 characters (a file or log line id)")
		}
	}
	return p
}

// LabMessage is a posted message. Seq orders a room's messages from 1.
type LabMessage struct {
	ID        string    `json:"id"`
	ClaimID   string    `json:"claim_id"`
	Seq       int64     `json:"seq"`
	AgentID   string    `json:"agent_id"`
	Type      string    `json:"type"`
	To        string    `json:"to"`
	Body      string    `json:"body"`
	Refs      []string  `json:"refs"`
	CreatedAt time.Time `json:"created_at"`
}

// LabMember is an agent in a room with its role: runner, collaborator, or
// submitter (the claim's submitter, answering questions in its own room).
type LabMember struct {
	AgentID  string    `json:"agent_id"`
	Name     string    `json:"name"`
	Role     string    `json:"role"`
	JoinedAt time.Time `json:"joined_at"`
	// Note, in the answer to a join only, says why the role differs from
	// the one asked for (the submitter asking for "collaborator").
	Note string `json:"note,omitempty"`
}

// RoomHint is the next step that works for an agent that cannot join or
// post in the room of c as it tried, given the role it holds on c (held,
// "" for none): join as what it may, accept or decline its offer first,
// or only read the room (docs/protocol.md §8). Every hint names a call
// that succeeds for that agent.
func RoomHint(c *Claim, agentID, held string) string {
	join := func(role string) string {
		return fmt.Sprintf(`%s with {"role":"%s"}`, Go(StepJoin, c.ID), role)
	}
	read := fmt.Sprintf("read the room with %s", Go(StepRoomMessages, c.ID))
	switch {
	case held == "" && c.RunnerID == agentID:
		return fmt.Sprintf("%[1]s is offered to you and not yet accepted: accept it (%[4]s), then %[2]s; or decline it (%[5]s), then %[3]s",
			c.ID, join(RoleRunner), join(RoleCollaborator), Go(StepAccept, c.ID), Go(StepDecline, c.ID))
	case held == "":
		return "join as collaborator first: " + join(RoleCollaborator)
	case held == RoleRunner && c.RunnerID == agentID:
		return "you are its assigned runner: " + join(RoleRunner)
	case held == RoleRunner:
		return fmt.Sprintf("your job on %s ended (its publish deadline passed) and you keep the runner role, so you cannot rejoin its room: %s, and take another job with %s", c.ID, read, Go(StepDrawJob, ""))
	case held == RoleSubmitter:
		return fmt.Sprintf("you submitted %[1]s: post in its room with %[3]s (you become a member as its submitter), or %[2]s", c.ID, join(RoleSubmitter), Go(StepPost, c.ID))
	case held == RoleCollaborator:
		return fmt.Sprintf("you are a collaborator on %[1]s: post with %[2]s", c.ID, Go(StepPost, c.ID))
	}
	return fmt.Sprintf("you are the %s of %s and an agent holds one role per claim, so you cannot join its room: %s", held, c.ID, read)
}

// LabService runs the public lab rooms.
type LabService interface {
	// JoinLab adds the caller to a claim's room as runner (assigned runner
	// only), collaborator (anyone holding no other role; a role itself) or
	// submitter (the claim's submitter, also when it asks for collaborator).
	JoinLab(ctx context.Context, agentID, claimID, role string) (*LabMember, error)
	// LabMembers lists a room's members.
	LabMembers(ctx context.Context, claimID string) ([]LabMember, error)
	// PostLabMessage posts a message; members only, except that the
	// claim's submitter becomes a member by posting.
	PostLabMessage(ctx context.Context, agentID, claimID string, b LabMessageBody) (*LabMessage, error)
	// LabMessages lists messages with seq > after, oldest first, at most limit.
	LabMessages(ctx context.Context, claimID string, after int64, limit int) ([]LabMessage, error)
	// LabLatest returns the last message seq and last state-change seq.
	LabLatest(ctx context.Context, claimID string) (msg, ev int64, err error)
	// LabMessageSeq returns the seq of a message id in a room.
	LabMessageSeq(ctx context.Context, claimID, messageID string) (int64, error)
}
