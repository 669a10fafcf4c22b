package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// AddMember makes w.AgentID a member of the room of w.ClaimID
// (store.MemberWrite), once: with w.TakeRole it also takes the role (a
// unique violation, another role meanwhile, is ECONFLICT); a Transition
// that moves (the runner's first join of an assigned claim) moves the
// claim, while the agent is its runner, with w.History.
func (db *DB) AddMember(ctx context.Context, w store.MemberWrite) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if w.TakeRole {
			if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, $3, $4)`,
				w.ClaimID, w.AgentID, w.Role, ms(w.At)); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO lab_members (claim_id, agent_id, role, joined_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (claim_id, agent_id) DO NOTHING`, w.ClaimID, w.AgentID, w.Role, ms(w.At)); err != nil {
			return err
		}
		t := w.Transition
		if !t.Moves() {
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = $4, updated_at = $1 WHERE id = $2 AND state = $5 AND runner_id = $3`,
			ms(w.At), w.ClaimID, w.AgentID, t.To, t.From)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return db.addHistory(ctx, tx, w.ClaimID, t, w.At, w.History...)
		}
		return nil
	})
	if isUniqueViolation(err) {
		return errSecondRole
	}
	return err
}

// LabMember is agentID's membership of the room of claimID; found is
// false for a non-member (store.Reader).
func (db *DB) LabMember(ctx context.Context, claimID, agentID string) (dotlab.LabMember, bool, error) {
	m := dotlab.LabMember{AgentID: agentID}
	var at int64
	err := db.r.QueryRowContext(ctx, `SELECT m.role, m.joined_at, a.name FROM lab_members m JOIN agents a ON a.id = m.agent_id
		WHERE m.claim_id = $1 AND m.agent_id = $2`, claimID, agentID).Scan(&m.Role, &at, &m.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	m.JoinedAt = fromMS(at)
	return m, err == nil, err
}

// Agent is a registered agent's record, or the ENOTFOUND error of an
// unknown id (store.Reader).
func (db *DB) Agent(ctx context.Context, id string) (*dotlab.Agent, error) {
	return db.getAgent(ctx, id)
}

// AddMessage posts a lab message (store.MessageWrite): the message takes
// the room's next seq from the counter on the claim row, so seqs are
// unique and gap-free under concurrent posts on both engines; w.Entries
// gives its log entries once the seq is known.
func (db *DB) AddMessage(ctx context.Context, w store.MessageWrite) error {
	m := w.Message
	refs, _ := json.Marshal(m.Refs)
	return db.tx(ctx, func(tx *sql.Tx) error {
		if w.JoinAsSubmitter {
			if _, err := tx.ExecContext(ctx, `INSERT INTO lab_members (claim_id, agent_id, role, joined_at) VALUES ($1, $2, 'submitter', $3)
				ON CONFLICT (claim_id, agent_id) DO NOTHING`, m.ClaimID, m.AgentID, ms(w.At)); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `UPDATE claims SET msg_seq = msg_seq + 1 WHERE id = $1 RETURNING msg_seq`, m.ClaimID).Scan(&m.Seq); err != nil {
			return err
		}
		db.announce(tx, dotlab.Change{ClaimID: m.ClaimID, Room: true, MessageSeq: m.Seq})
		if _, err := tx.ExecContext(ctx, `INSERT INTO lab_messages (id, claim_id, seq, agent_id, type, to_agent, body, refs, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, m.ID, m.ClaimID, m.Seq, m.AgentID, m.Type, m.To, m.Body, string(refs), ms(w.At)); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Entries(m))
	})
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
