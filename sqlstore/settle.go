package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// The settlement clock's persistence (docs/mechanism.md §5): the changes
// due at a time (Due), and each applied as a conditional UPDATE in its own
// transaction (ApplyDue), so that a sweep is idempotent and safe when
// several server processes share one PostgreSQL database: exactly one of
// them applies each change. The sweep itself is the protocol's
// (protocol.Service.Settle).

// dueQueries find what each event of the settlement clock finds due:
// claim, runner, the deadline, and the run (window close).
var dueQueries = map[dotlab.Event]string{
	dotlab.EventExpire: `SELECT id, runner_id, offer_expires_at, '', '' FROM claims WHERE offer_expires_at <= $1 AND state IN (` + sources(dotlab.EventExpire) + `)
		AND runner_id IS NOT NULL ORDER BY offer_expires_at LIMIT $2`,
	dotlab.EventAbandon: `SELECT id, runner_id, publish_deadline, '', '' FROM claims WHERE publish_deadline <= $1 AND state IN (` + sources(dotlab.EventAbandon) + `)
		ORDER BY publish_deadline LIMIT $2`,
	dotlab.EventWindowClose: `SELECT c.id, c.runner_id, c.challenge_deadline, COALESCE(r.id, ''), COALESCE(r.outcome, '') FROM claims c LEFT JOIN runs r ON r.claim_id = c.id
		WHERE c.challenge_deadline <= $1 AND c.state IN (` + sources(dotlab.EventWindowClose) + `) ORDER BY c.challenge_deadline LIMIT $2`,
}

// Due lists up to limit changes of event ev due at now (store.Reader).
func (db *DB) Due(ctx context.Context, ev dotlab.Event, now time.Time, limit int) ([]store.Due, error) {
	q, ok := dueQueries[ev]
	if !ok {
		return nil, fmt.Errorf("settlement: no due query for %s", ev)
	}
	rows, err := db.r.QueryContext(ctx, q, ms(now), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Due
	for rows.Next() {
		var d store.Due
		var agent sql.NullString
		var at int64
		if err := rows.Scan(&d.ClaimID, &agent, &at, &d.RunID, &d.Outcome); err != nil {
			return nil, err
		}
		d.AgentID, d.At = agent.String, fromMS(at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// ApplyDue applies one due change (store.DueWrite) in its own
// transaction; applied is false when another process got there first (or
// the claim moved).
func (db *DB) ApplyDue(ctx context.Context, w store.DueWrite) (bool, error) {
	apply := map[dotlab.Event]func(*sql.Tx, store.DueWrite) (bool, error){
		dotlab.EventExpire: db.expireOffer, dotlab.EventAbandon: db.abandonJob, dotlab.EventWindowClose: db.closeWindow,
	}[w.Transition.Event]
	if apply == nil {
		return false, fmt.Errorf("settlement: cannot apply %s", w.Transition.Event)
	}
	done := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if done, err = apply(tx, w); err != nil || !done {
			return err
		}
		if len(w.History) > 0 {
			if err := db.addHistory(ctx, tx, w.Due.ClaimID, w.Transition, w.At, w.History...); err != nil {
				return err
			}
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	return done, err
}

// changed reports whether res changed exactly one row.
func changed(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (db *DB) expireOffer(tx *sql.Tx, w store.DueWrite) (bool, error) {
	ctx, t, d, now := context.Background(), w.Transition, w.Due, ms(w.At)
	ok, err := changed(tx.ExecContext(ctx, `UPDATE claims SET runner_id = NULL, offer_expires_at = NULL, draw_key = $1, updated_at = $2
		WHERE id = $3 AND state = $5 AND runner_id = $4 AND offer_expires_at <= $2`, newDrawKey(), now, d.ClaimID, d.AgentID, t.From))
	if !ok || err != nil {
		return false, err
	}
	db.announceClaim(tx, d.ClaimID)
	_, err = tx.ExecContext(ctx, `UPDATE jobs SET state = $4, closed_at = $1 WHERE claim_id = $2 AND agent_id = $3 AND state = $5`,
		now, d.ClaimID, d.AgentID, t.JobTo, t.JobFrom)
	return true, err
}

func (db *DB) abandonJob(tx *sql.Tx, w store.DueWrite) (bool, error) {
	ctx, t, d, now := context.Background(), w.Transition, w.Due, ms(w.At)
	ok, err := changed(tx.ExecContext(ctx, `UPDATE claims SET state = $5, runner_id = NULL, publish_deadline = NULL, draw_key = $1, updated_at = $2
		WHERE id = $3 AND state IN (`+sources(t.Event)+`) AND runner_id = $4 AND publish_deadline <= $2`, newDrawKey(), now, d.ClaimID, d.AgentID, t.To))
	if !ok || err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $4, closed_at = $1 WHERE claim_id = $2 AND agent_id = $3 AND state = $5`,
		now, d.ClaimID, d.AgentID, t.JobTo, t.JobFrom); err != nil {
		return false, err
	}
	// Room membership ends with the job; its messages stay. The runner
	// role stays too, so the abandoning agent takes no other role on this
	// claim and is never offered it again.
	_, err = tx.ExecContext(ctx, `DELETE FROM lab_members WHERE claim_id = $1 AND agent_id = $2`, d.ClaimID, d.AgentID)
	return true, err
}

func (db *DB) closeWindow(tx *sql.Tx, w store.DueWrite) (bool, error) {
	t, d, now := w.Transition, w.Due, ms(w.At)
	return changed(tx.ExecContext(context.Background(), `UPDATE claims SET state = $3, outcome = $5, settled_at = $1, updated_at = $1
		WHERE id = $2 AND state = $4 AND challenge_deadline <= $1`, now, d.ClaimID, t.To, t.From, w.Outcome))
}
