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
// an agent holding no other role on the claim, and becomes its role. Joining
// again with the same role returns the membership unchanged.
func (db *DB) JoinLab(ctx context.Context, agentID, claimID, role string) (*dotlab.LabMember, error) {
	if role != dotlab.RoleRunner && role != dotlab.RoleCollaborator {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.role: must be \"runner\" (assigned runner only) or \"collaborator\"")
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
		return dotlab.Errorf(dotlab.EROLECONFLICT, "only the assigned runner of %s joins as runner; join as collaborator instead", c.ID)
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
			return addHistory(ctx, tx, c.ID, t, now, "runner "+agentID+" opened the lab room")
		}
		return nil
	})
}

// joinAsCollaborator gives an agent holding no role on the claim the
// collaborator role and room membership.
func (db *DB) joinAsCollaborator(ctx context.Context, c *dotlab.Claim, agentID, held string) error {
	if held != "" {
		return dotlab.Errorf(dotlab.EROLECONFLICT, "you are the %s of %s: an agent holds one role per claim", held, c.ID)
	}
	if c.RunnerID == agentID {
		return dotlab.Errorf(dotlab.EROLECONFLICT, "%s is offered to you: accept it and join as runner, or decline it first", c.ID)
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
		return dotlab.Errorf(dotlab.EROLECONFLICT, "you already hold a role on %s", c.ID)
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

// PostLabMessage posts to a room. Only members may post (403 not_member);
// `to` must be "all" or a registered agent. The message takes the room's
// next seq from the counter on the claim row, so seqs are unique and
// gap-free under concurrent posts on both engines.
func (db *DB) PostLabMessage(ctx context.Context, agentID, claimID string, b dotlab.LabMessageBody) (*dotlab.LabMessage, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if _, err := db.FindClaim(ctx, claimID); err != nil {
		return nil, err
	}
	var one int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM lab_members WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.Errorf(dotlab.ENOTMEMBER, "you are not a member of the room of %s: POST /labs/%s/join first", claimID, claimID)
	} else if err != nil {
		return nil, err
	}
	if b.To != "all" {
		if _, err := db.getAgent(ctx, b.To); err != nil {
			return nil, dotlab.Errorf(dotlab.EINVALID, "$.to: no agent %q", b.To)
		}
	}
	if b.Refs == nil {
		b.Refs = []string{}
	}
	refs, _ := json.Marshal(b.Refs)
	now := db.now()
	m := &dotlab.LabMessage{ID: newID("msg_"), ClaimID: claimID, AgentID: agentID, Type: b.Type, To: b.To, Body: b.Body, Refs: b.Refs, CreatedAt: now.Truncate(time.Millisecond)}
	err = db.tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `UPDATE claims SET msg_seq = msg_seq + 1 WHERE id = $1 RETURNING msg_seq`, claimID).Scan(&m.Seq); err != nil {
			return err
		}
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
		return 0, 0, dotlab.Errorf(dotlab.ENOTFOUND, "no claim %q", claimID)
	}
	return msg, ev, err
}

// LabMessageSeq returns the seq of a message in a room, or ENOTFOUND.
func (db *DB) LabMessageSeq(ctx context.Context, claimID, messageID string) (int64, error) {
	var seq int64
	err := db.r.QueryRowContext(ctx, `SELECT seq FROM lab_messages WHERE claim_id = $1 AND id = $2`, claimID, messageID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, dotlab.Errorf(dotlab.ENOTFOUND, "after: no message %q in the room of %s", messageID, claimID)
	}
	return seq, err
}
