package protocol

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

var _ dotlab.LabService = (*Service)(nil)

// JoinLab is the join step (docs/protocol.md §8 "Join"): agentID joins the
// room of claimID. Role "runner" is for the assigned runner only and moves
// an assigned claim to running (dotlab.EventJoinRunner); "collaborator" is
// for an agent holding no other role on the claim, and becomes its role;
// the claim's submitter, asking for "collaborator" or "submitter", joins
// as "submitter" (it keeps its one role), and when it asked for
// "collaborator" the answer's note says so. Joining again returns the
// membership unchanged. Every refusal (EROLECONFLICT) carries
// dotlab.RoomHint, a next step that works.
func (s *Service) JoinLab(ctx context.Context, agentID, claimID, role string) (*dotlab.LabMember, error) {
	if role != dotlab.RoleRunner && role != dotlab.RoleCollaborator && role != dotlab.RoleSubmitter {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.role: must be \"runner\" (assigned runner only), \"collaborator\" or \"submitter\" (the claim's submitter only)")
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	if _, err := s.Store.Agent(ctx, agentID); err != nil {
		return nil, err
	}
	held, err := s.Store.RoleOf(ctx, claimID, agentID)
	if err != nil {
		return nil, err
	}
	w, err := joinWrite(c, agentID, role, held)
	if err != nil {
		return nil, err
	}
	if w != nil {
		w.At = s.now()
		if err := s.Store.AddMember(ctx, *w); dotlab.ErrorCode(err) == dotlab.ECONFLICT {
			return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "you took another role on %s while joining, and an agent holds one role per claim: %s shows the room", c.ID, dotlab.Go(dotlab.StepRoomMembers, c.ID))
		} else if err != nil {
			return nil, err
		}
	}
	m, _, err := s.Store.LabMember(ctx, claimID, agentID)
	if err == nil && held == dotlab.RoleSubmitter && role == dotlab.RoleCollaborator {
		m.Note = fmt.Sprintf("you submitted %s, and an agent holds one role per claim: you are in its room as its submitter, not as a collaborator (you may post; only the runner publishes the run)", c.ID)
	}
	return &m, err
}

// joinWrite is the membership agentID may take in c's room as role, given
// the role it holds (held), or the refusal; nil when it is a collaborator
// already (joining again).
func joinWrite(c *dotlab.Claim, agentID, role, held string) (*store.MemberWrite, error) {
	hint := dotlab.RoomHint(c, agentID, held)
	switch {
	case role == dotlab.RoleRunner:
		if held != dotlab.RoleRunner || c.RunnerID != agentID {
			return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "only the assigned runner of %s joins as runner; %s", c.ID, hint)
		}
		t, err := dotlab.Next(dotlab.StateAssigned, dotlab.EventJoinRunner) // from any later state it moves nothing
		if err != nil {
			return nil, err
		}
		return &store.MemberWrite{ClaimID: c.ID, AgentID: agentID, Role: dotlab.RoleRunner, Transition: t,
			History: []string{"runner " + agentID + " opened the lab room"}}, nil
	case held == dotlab.RoleSubmitter:
		return &store.MemberWrite{ClaimID: c.ID, AgentID: agentID, Role: dotlab.RoleSubmitter}, nil
	case role == dotlab.RoleSubmitter:
		return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "only the submitter of %s joins as submitter; %s", c.ID, hint)
	case held == dotlab.RoleCollaborator:
		return nil, nil
	case held != "":
		return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "%s", hint) // the hint says which role is held, and why it keeps you out
	case c.RunnerID == agentID:
		return nil, dotlab.Errorf(dotlab.EROLECONFLICT, "you cannot collaborate on %s now; %s", c.ID, hint)
	}
	return &store.MemberWrite{ClaimID: c.ID, AgentID: agentID, Role: dotlab.RoleCollaborator, TakeRole: true}, nil
}

// PostLabMessage is the post step (docs/protocol.md §8): a message in the
// room of claimID. In order: the body (dotlab.LabMessageBody.Validate);
// the message quotas (Config.MessageQuota: ERATELIMITED); the claim; the caller is a member, or the claim's submitter, who becomes
// one by posting (ENOTMEMBER otherwise, with the step that lets it post);
// `to` is "all" or a registered agent; the secret screen of its body and
// refs. The message's digest is logged.
func (s *Service) PostLabMessage(ctx context.Context, agentID, claimID string, b dotlab.LabMessageBody) (*dotlab.LabMessage, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if err := s.quota.take(s.Store.Now(), agentID, claimID); err != nil {
		return nil, err
	}
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	submitter, err := s.mayPost(ctx, c, agentID)
	if err != nil {
		return nil, err
	}
	if err := s.screenMessage(b); err != nil {
		return nil, err
	}
	if b.To != "all" {
		if _, err := s.Store.Agent(ctx, b.To); err != nil {
			return nil, dotlab.Errorf(dotlab.EINVALID, "$.to: no agent %q: give \"all\" or the id of a registered agent (%s lists the room's)", b.To, dotlab.Go(dotlab.StepRoomMembers, claimID))
		}
	}
	if b.Refs == nil {
		b.Refs = []string{}
	}
	at := s.now()
	m := &dotlab.LabMessage{ID: dotlab.NewID("msg_"), ClaimID: claimID, AgentID: agentID, Type: b.Type, To: b.To, Body: b.Body, Refs: b.Refs, CreatedAt: at}
	err = s.Store.AddMessage(ctx, store.MessageWrite{Write: store.Write{At: at}, Message: m, JoinAsSubmitter: submitter,
		Entries: func(m *dotlab.LabMessage) []tlogfmt.Entry { return []tlogfmt.Entry{tlogfmt.MessageEntry(m)} }})
	if err != nil {
		return nil, err
	}
	s.quota.posted(s.Store.Now(), claimID)
	return m, nil
}

// screenMessage screens what a message makes public: its body and refs.
func (s *Service) screenMessage(b dotlab.LabMessageBody) error {
	fields := map[string]string{"$.body": b.Body}
	for i, ref := range b.Refs {
		fields[fmt.Sprintf("$.refs[%d]", i)] = ref
	}
	return s.screenText(fields)
}

// mayPost checks that agentID may post in the room of c: a member may; the
// claim's submitter may and becomes a member by posting (submitter is
// true); anyone else gets ENOTMEMBER with the step that lets it post, or
// read (dotlab.RoomHint).
func (s *Service) mayPost(ctx context.Context, c *dotlab.Claim, agentID string) (submitter bool, err error) {
	if _, member, err := s.Store.LabMember(ctx, c.ID, agentID); member || err != nil {
		return false, err
	}
	held, err := s.Store.RoleOf(ctx, c.ID, agentID)
	if err != nil {
		return false, err
	}
	if held == dotlab.RoleSubmitter {
		return true, nil
	}
	return false, dotlab.Errorf(dotlab.ENOTMEMBER, "you are not a member of the room of %s; %s", c.ID, dotlab.RoomHint(c, agentID, held))
}
