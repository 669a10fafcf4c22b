package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/dotlab/dotlab"
)

// settleBatch bounds how many due items one sweep step takes.
const settleBatch = 200

// Settle does what is due at the store's current time (docs/mechanism.md §5
// "Settlement clock"): ignored offers expire (dotlab.EventExpire: the claim
// returns to the pool), missed publish deadlines become abandoned jobs
// (dotlab.EventAbandon: the claim returns to the pool; the runner's standing
// falls), and claims whose challenge window closed without disagreement
// settle with the run's outcome (dotlab.EventWindowClose).
//
// Every change is a conditional UPDATE in its own transaction, so Settle is
// idempotent and safe when several server processes share one PostgreSQL
// database: exactly one of them applies each change. Whatever was due while
// no server ran is done by the next Settle.
func (db *DB) Settle(ctx context.Context) (dotlab.SettleReport, error) {
	var rep dotlab.SettleReport
	now := db.now()
	steps := []struct {
		count *int
		event dotlab.Event
		step  func(context.Context, time.Time) (applied []due, seen int, err error)
	}{
		{&rep.OffersExpired, dotlab.EventExpire, db.expireOffers},
		{&rep.JobsAbandoned, dotlab.EventAbandon, db.abandonJobs},
		{&rep.ClaimsSettled, dotlab.EventWindowClose, db.settleWindows},
	}
	for _, s := range steps {
		for {
			applied, seen, err := s.step(ctx, now)
			*s.count += len(applied)
			for _, d := range applied {
				rep.Changed = append(rep.Changed, d.claim)
				rep.Lags = append(rep.Lags, dotlab.SettleLag{Event: s.event, Late: d.late})
			}
			if err != nil {
				return rep, err
			}
			if seen < settleBatch {
				break
			}
		}
	}
	return rep, nil
}

// applyEach runs fn for each due item in its own transaction and returns
// the items it applied (fn reports false when another process got there
// first), each with how late it committed after falling due, and how many
// items it saw.
func (db *DB) applyEach(ctx context.Context, ds []due, fn func(*sql.Tx, due) (bool, error)) ([]due, int, error) {
	var applied []due
	for _, d := range ds {
		done := false
		err := db.tx(ctx, func(tx *sql.Tx) error {
			var err error
			done, err = fn(tx, d)
			return err
		})
		if err != nil {
			return applied, len(ds), err
		}
		if done {
			d.late = max(db.now().Sub(fromMS(d.at)), 0)
			applied = append(applied, d)
		}
	}
	return applied, len(ds), nil
}

// due is one change the settlement clock found due: the claim, its runner
// (if any), the deadline that made it due (Unix ms) and, once applied, how
// late it committed.
type due struct {
	claim, agent string
	at           int64
	late         time.Duration
}

func (db *DB) dueRows(ctx context.Context, query string, now time.Time) ([]due, error) {
	rows, err := db.r.QueryContext(ctx, query, ms(now), settleBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []due
	for rows.Next() {
		var d due
		var agent sql.NullString
		if err := rows.Scan(&d.claim, &agent, &d.at); err != nil {
			return nil, err
		}
		d.agent = agent.String
		out = append(out, d)
	}
	return out, rows.Err()
}

func (db *DB) expireOffers(ctx context.Context, now time.Time) ([]due, int, error) {
	t, err := transition(dotlab.StateFunded, dotlab.EventExpire)
	if err != nil {
		return nil, 0, err
	}
	ds, err := db.dueRows(ctx, `SELECT id, runner_id, offer_expires_at FROM claims WHERE offer_expires_at <= $1 AND state IN (`+sources(t.Event)+`)
		AND runner_id IS NOT NULL ORDER BY offer_expires_at LIMIT $2`, now)
	if err != nil {
		return nil, 0, err
	}
	return db.applyEach(ctx, ds, func(tx *sql.Tx, d due) (bool, error) {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET runner_id = NULL, offer_expires_at = NULL, draw_key = $1, updated_at = $2
			WHERE id = $3 AND state = $5 AND runner_id = $4 AND offer_expires_at <= $2`, newDrawKey(), ms(now), d.claim, d.agent, t.From)
		if err != nil {
			return false, err
		}
		if c, _ := res.RowsAffected(); c != 1 {
			return false, nil
		}
		db.announceClaim(tx, d.claim)
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET state = $4, closed_at = $1 WHERE claim_id = $2 AND agent_id = $3 AND state = $5`,
			ms(now), d.claim, d.agent, t.JobTo, t.JobFrom)
		return true, err
	})
}

func (db *DB) abandonJobs(ctx context.Context, now time.Time) ([]due, int, error) {
	// From assigned and from running the move is the same.
	t, err := transition(dotlab.StateAssigned, dotlab.EventAbandon)
	if err != nil {
		return nil, 0, err
	}
	ds, err := db.dueRows(ctx, `SELECT id, runner_id, publish_deadline FROM claims WHERE publish_deadline <= $1 AND state IN (`+sources(t.Event)+`)
		ORDER BY publish_deadline LIMIT $2`, now)
	if err != nil {
		return nil, 0, err
	}
	return db.applyEach(ctx, ds, func(tx *sql.Tx, d due) (bool, error) {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = $5, runner_id = NULL, publish_deadline = NULL, draw_key = $1, updated_at = $2
			WHERE id = $3 AND state IN (`+sources(t.Event)+`) AND runner_id = $4 AND publish_deadline <= $2`, newDrawKey(), ms(now), d.claim, d.agent, t.To)
		if err != nil {
			return false, err
		}
		if c, _ := res.RowsAffected(); c != 1 {
			return false, nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $4, closed_at = $1 WHERE claim_id = $2 AND agent_id = $3 AND state = $5`,
			ms(now), d.claim, d.agent, t.JobTo, t.JobFrom); err != nil {
			return false, err
		}
		// Room membership ends with the job; its messages stay. The runner
		// role stays too, so the abandoning agent takes no other role on
		// this claim and is never offered it again.
		if _, err := tx.ExecContext(ctx, `DELETE FROM lab_members WHERE claim_id = $1 AND agent_id = $2`, d.claim, d.agent); err != nil {
			return false, err
		}
		return true, db.addHistory(ctx, tx, d.claim, t, now, "job abandoned by "+d.agent+" (publish deadline missed): back in the pool")
	})
}

func (db *DB) settleWindows(ctx context.Context, now time.Time) ([]due, int, error) {
	t, err := transition(dotlab.StateChallengeWindow, dotlab.EventWindowClose)
	if err != nil {
		return nil, 0, err
	}
	ds, err := db.dueRows(ctx, `SELECT id, runner_id, challenge_deadline FROM claims WHERE challenge_deadline <= $1 AND state IN (`+sources(t.Event)+`)
		ORDER BY challenge_deadline LIMIT $2`, now)
	if err != nil {
		return nil, 0, err
	}
	return db.applyEach(ctx, ds, func(tx *sql.Tx, d due) (bool, error) {
		// The window closed without disagreement: the run's outcome.
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = $3,
			outcome = (SELECT outcome FROM runs WHERE runs.claim_id = claims.id), settled_at = $1, updated_at = $1
			WHERE id = $2 AND state = $4 AND challenge_deadline <= $1`, ms(now), d.claim, t.To, t.From)
		if err != nil {
			return false, err
		}
		if c, _ := res.RowsAffected(); c != 1 {
			return false, nil
		}
		if err := db.addHistory(ctx, tx, d.claim, t, now, "challenge window closed without disagreement"); err != nil {
			return false, err
		}
		return true, db.logSettlement(ctx, tx, d.claim)
	})
}
