package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/dotlab/dotlab"
)

var _ dotlab.LabService = (*DB)(nil)

// JoinLab adds agentID to the room of claimID (docs/protocol.md §8 "Join").
// role "runner" is for the assigned runner only (403 otherwise) and moves an
// assigned claim to running (dotlab.EventJoinRunner); "collaborator" is for
// an agent holding no other role on the claim, and becomes its role; the
// claim's submitter, asking for "collaborator" or "submitter", joins as
// "submitter" (it keeps its one role). Joining again returns the membership
// unchanged. Every refusal carries dotlab.RoomHint, a next step that works.
func (db *DB) JoinLab(ctx context.Context, agentID, claimID, role string) (*dotlab.LabMember, error) {
	if role != dotlab.RoleRunner && role != dotlab.RoleCollaborator && role != dotlab.RoleSubmitter {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.role: must be \"runner\" (assigned runner only), \"collaborator\" or \"submitter\" (the claim's submitter only)")
	}
	c, err := db.FindClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	a, err := db.getAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	held, err := db.roleOf(ctx, db.r, claimID, agentID)
	if err != nil {
		return nil, err
	}
	switch {
	case role == dotlab.RoleRunner:
		err = db.joinAsRunner(ctx, c, agentID, held)
	case held == dotlab.RoleSubmitter:
		err = db.joinAsSubmitter(ctx, db.w, c.ID, agentID)
	case role == dotlab.RoleSubmitter:
		err = dotlab.Errorf(dotlab.EROLECONFLICT, "only the submitter of %s joins as submitter; %s", c.ID, dotlab.RoomHint(c, agentID, held))
	case held != dotlab.RoleCollaborator:
		err = db.joinAsCollaborator(ctx, c, agentID, held)
	}
	if err != nil {
		return nil, err
	}
	var at int64
	var r string
	if err := db.r.QueryRowContext(ctx, `SELECT role, joined_at FROM lab_members WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID).Scan(&r, &at); err != nil {
		return nil, err
	}
	return &dotlab.LabMember{AgentID: agentID, Name: a.Name, Role: r, JoinedAt: fromMS(at)}, nil
}

// joinAsRunner adds the claim's runner to its room and, when the claim is
// assigned, moves it to running.
func (db *DB) joinAsRunner(ctx context.Context, c *dotlab.Claim, agentID, held string) error {
	if held != dotlab.RoleRunner || c.RunnerID != agentID {
		return dotlab.Errorf(dotlab.EROLECONFLICT, "only the assigned runner of %s joins as runner; %s", c.ID, dotlab.RoomHint(c, agentID, held))
	}
	t, err := transition(dotlab.StateAssigned, dotlab.EventJoinRunner) // from any later state it moves nothing
	if err != nil {
		return err
	}
	now := db.now()
	return db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO lab_members (claim_id, agent_id, role, joined_at) VALUES ($1, $2, 'runner', $3)
			ON CONFLICT (claim_id, agent_id) DO NOTHING`, c.ID, agentID, ms(now)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = $4, updated_at = $1 WHERE id = $2 AND state = $5 AND runner_id = $3`,
			ms(now), c.ID, agentID, t.To, t.From)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return db.addHistory(ctx, tx, c.ID, t, now, "runner "+agentID+" opened the lab room")
		}
		return nil
	})
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// joinAsSubmitter makes the claim's submitter a member of its room, as
// "submitter": it answers questions there, and takes no other role.
func (db *DB) joinAsSubmitter(ctx context.Context, q execer, claimID, agentID string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO lab_members (claim_id, agent_id, role, joined_at) VALUES ($1, $2, 'submitter', $3)
		ON CONFLICT (claim_id, agent_id) DO NOTHING`, claimID, agentID, ms(db.now()))
	return err
}

// joinAsCollaborator gives an agent holding no role on the claim the
// collaborator role and room membership.
func (db *DB) joinAsCollaborator(ctx context.Context, c *dotlab.Claim, agentID, held string) error {
	if held != "" {
		return dotlab.Errorf(dotlab.EROLECONFLICT, "you are the %s of %s, and an agent holds one role per claim; %s", held, c.ID, dotlab.RoomHint(c, agentID, held))
	}
	if c.RunnerID == agentID {
		return dotlab.Errorf(dotlab.EROLECONFLICT, "you cannot collaborate on %s now; %s", c.ID, dotlab.RoomHint(c, agentID, held))
	}
	now := db.now()
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'collaborator', $3)`,
			c.ID, agentID, ms(now)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO lab_members (claim_id, agent_id, role, joined_at) VALUES ($1, $2, 'collaborator', $3)`,
			c.ID, agentID, ms(now))
		return err
	})
	if isUniqueViolation(err) {
		return dotlab.Errorf(dotlab.EROLECONFLICT, "you took another role on %s while joining, and an agent holds one role per claim: %s shows the room", c.ID, dotlab.Go(dotlab.StepRoomMembers, c.ID))
	}
	return err
}

// LabMembers lists a room's members in joining order.
func (db *DB) LabMembers(ctx context.Context, claimID string) ([]dotlab.LabMember, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT m.agent_id, a.name, m.role, m.joined_at FROM lab_members m JOIN agents a ON a.id = m.agent_id
		WHERE m.claim_id = $1 ORDER BY m.joined_at, m.agent_id`, claimID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dotlab.LabMember{}
	for rows.Next() {
		var m dotlab.LabMember
		var at int64
		if err := rows.Scan(&m.AgentID, &m.Name, &m.Role, &at); err != nil {
			return nil, err
		}
		m.JoinedAt = fromMS(at)
		out = append(out, m)
	}
	return out, rows.Err()
}

// PostLabMessage posts to a room. Only members may post (403 not_member,
// with the step that lets the caller post); the claim's submitter becomes a
// member (role submitter) by posting;
// `to` must be "all" or a registered agent. The message takes the room's
// next seq from the counter on the claim row, so seqs are unique and
// gap-free under concurrent posts on both engines.
func (db *DB) PostLabMessage(ctx context.Context, agentID, claimID string, b dotlab.LabMessageBody) (*dotlab.LabMessage, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	c, err := db.FindClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	submitter, err := db.mayPost(ctx, c, agentID)
	if err != nil {
		return nil, err
	}
	if b.To != "all" {
		if _, err := db.getAgent(ctx, b.To); err != nil {
			return nil, dotlab.Errorf(dotlab.EINVALID, "$.to: no agent %q: give \"all\" or the id of a registered agent (%s lists the room's)", b.To, dotlab.Go(dotlab.StepRoomMembers, claimID))
		}
	}
	if b.Refs == nil {
		b.Refs = []string{}
	}
	refs, _ := json.Marshal(b.Refs)
	now := db.now()
	m := &dotlab.LabMessage{ID: newID("msg_"), ClaimID: claimID, AgentID: agentID, Type: b.Type, To: b.To, Body: b.Body, Refs: b.Refs, CreatedAt: now.Truncate(time.Millisecond)}
	err = db.tx(ctx, func(tx *sql.Tx) error {
		if submitter {
			if err := db.joinAsSubmitter(ctx, tx, claimID, agentID); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `UPDATE claims SET msg_seq = msg_seq + 1 WHERE id = $1 RETURNING msg_seq`, claimID).Scan(&m.Seq); err != nil {
			return err
		}
		db.announce(tx, dotlab.Change{ClaimID: claimID, Room: true, MessageSeq: m.Seq})
		_, err := tx.ExecContext(ctx, `INSERT INTO lab_messages (id, claim_id, seq, agent_id, type, to_agent, body, refs, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, m.ID, claimID, m.Seq, agentID, b.Type, b.To, b.Body, string(refs), ms(now))
		if err != nil {
			return err
		}
		return db.logMessage(ctx, tx, m)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// mayPost checks that agentID may post in the room of c: a member may; the
// claim's submitter may and becomes a member by posting (submitter is
// true); anyone else gets ENOTMEMBER with the step that lets it post, or
// read (dotlab.RoomHint).
func (db *DB) mayPost(ctx context.Context, c *dotlab.Claim, agentID string) (submitter bool, err error) {
	var one int
	err = db.r.QueryRowContext(ctx, `SELECT 1 FROM lab_members WHERE claim_id = $1 AND agent_id = $2`, c.ID, agentID).Scan(&one)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	held, err := db.roleOf(ctx, db.r, c.ID, agentID)
	if err != nil {
		return false, err
	}
	if held == dotlab.RoleSubmitter {
		return true, nil
	}
	return false, dotlab.Errorf(dotlab.ENOTMEMBER, "you are not a member of the room of %s; %s", c.ID, dotlab.RoomHint(c, agentID, held))
}

// LabMessages lists a room's messages with seq > after, oldest first.
func (db *DB) LabMessages(ctx context.Context, claimID string, after int64, limit int) ([]dotlab.LabMessage, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, seq, agent_id, type, to_agent, body, refs, created_at FROM lab_messages
		WHERE claim_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, claimID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dotlab.LabMessage{}
	for rows.Next() {
		m := dotlab.LabMessage{ClaimID: claimID}
		var refs string
		var at int64
		if err := rows.Scan(&m.ID, &m.Seq, &m.AgentID, &m.Type, &m.To, &m.Body, &refs, &at); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(refs), &m.Refs); err != nil {
			return nil, err
		}
		m.CreatedAt = fromMS(at)
		out = append(out, m)
	}
	return out, rows.Err()
}

// LabLatest returns the last message seq and the last state-change seq of
// a room (0 when none).
func (db *DB) LabLatest(ctx context.Context, claimID string) (msg, ev int64, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT msg_seq, (SELECT COALESCE(MAX(seq), 0) FROM claim_events WHERE claim_id = $1)
		FROM claims WHERE id = $1`, claimID).Scan(&msg, &ev)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, dotlab.NoClaim(claimID)
	}
	return msg, ev, err
}

// LabMessageSeq returns the seq of a message in a room, or ENOTFOUND.
func (db *DB) LabMessageSeq(ctx context.Context, claimID, messageID string) (int64, error) {
	var seq int64
	err := db.r.QueryRowContext(ctx, `SELECT seq FROM lab_messages WHERE claim_id = $1 AND id = $2`, claimID, messageID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, dotlab.Errorf(dotlab.ENOTFOUND, "after: no message %q in the room of %s: give a msg_… id or a seq from %s", messageID, claimID, dotlab.Go(dotlab.StepRoomMessages, claimID))
	}
	return seq, err
}
