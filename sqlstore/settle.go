package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/dotlab/dotlab"
)

func itoa(n int) string { return strconv.Itoa(n) }

// settleBatch bounds how many due items one sweep step takes.
const settleBatch = 200

// Settle does what is due at the store's current time (DESIGN.md
// "Lifecycle"): ignored offers expire (the claim returns to the pool),
// missed publish deadlines become abandoned jobs (the claim returns to the
// pool; the runner's standing falls), and claims whose challenge window
// closed without disagreement settle with the run's outcome.
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
		step  func(context.Context, time.Time) (applied []string, seen int, err error)
	}{
		{&rep.OffersExpired, db.expireOffers},
		{&rep.JobsAbandoned, db.abandonJobs},
		{&rep.ClaimsSettled, db.settleWindows},
	}
	for _, s := range steps {
		for {
			applied, seen, err := s.step(ctx, now)
			*s.count += len(applied)
			rep.Changed = append(rep.Changed, applied...)
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
// the claims it applied to (fn reports false when another process got there
// first) and how many items it saw.
func (db *DB) applyEach(ctx context.Context, ds []due, fn func(*sql.Tx, due) (bool, error)) ([]string, int, error) {
	var applied []string
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
			applied = append(applied, d.claim)
		}
	}
	return applied, len(ds), nil
}

type due struct{ claim, agent string }

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
		if err := rows.Scan(&d.claim, &agent); err != nil {
			return nil, err
		}
		d.agent = agent.String
		out = append(out, d)
	}
	return out, rows.Err()
}

func (db *DB) expireOffers(ctx context.Context, now time.Time) ([]string, int, error) {
	ds, err := db.dueRows(ctx, `SELECT id, runner_id FROM claims WHERE offer_expires_at <= $1 AND state = 'funded'
		AND runner_id IS NOT NULL ORDER BY offer_expires_at LIMIT $2`, now)
	if err != nil {
		return nil, 0, err
	}
	return db.applyEach(ctx, ds, func(tx *sql.Tx, d due) (bool, error) {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET runner_id = NULL, offer_expires_at = NULL, draw_key = $1, updated_at = $2
			WHERE id = $3 AND state = 'funded' AND runner_id = $4 AND offer_expires_at <= $2`, newDrawKey(), ms(now), d.claim, d.agent)
		if err != nil {
			return false, err
		}
		if c, _ := res.RowsAffected(); c != 1 {
			return false, nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET state = 'expired', closed_at = $1 WHERE claim_id = $2 AND agent_id = $3 AND state = 'offered'`,
			ms(now), d.claim, d.agent)
		return true, err
	})
}

func (db *DB) abandonJobs(ctx context.Context, now time.Time) ([]string, int, error) {
	ds, err := db.dueRows(ctx, `SELECT id, runner_id FROM claims WHERE publish_deadline <= $1 AND state IN ('assigned', 'running')
		ORDER BY publish_deadline LIMIT $2`, now)
	if err != nil {
		return nil, 0, err
	}
	return db.applyEach(ctx, ds, func(tx *sql.Tx, d due) (bool, error) {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = 'funded', runner_id = NULL, publish_deadline = NULL, draw_key = $1, updated_at = $2
			WHERE id = $3 AND state IN ('assigned', 'running') AND runner_id = $4 AND publish_deadline <= $2`, newDrawKey(), ms(now), d.claim, d.agent)
		if err != nil {
			return false, err
		}
		if c, _ := res.RowsAffected(); c != 1 {
			return false, nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'abandoned', closed_at = $1 WHERE claim_id = $2 AND agent_id = $3 AND state = 'accepted'`,
			ms(now), d.claim, d.agent); err != nil {
			return false, err
		}
		// Room membership ends with the job; its messages stay. The runner
		// role stays too, so the abandoning agent takes no other role on
		// this claim and is never offered it again.
		if _, err := tx.ExecContext(ctx, `DELETE FROM lab_members WHERE claim_id = $1 AND agent_id = $2`, d.claim, d.agent); err != nil {
			return false, err
		}
		return true, addEvent(ctx, tx, d.claim, dotlab.StateFunded, now, "job abandoned by "+d.agent+" (publish deadline missed): back in the pool")
	})
}

func (db *DB) settleWindows(ctx context.Context, now time.Time) ([]string, int, error) {
	ds, err := db.dueRows(ctx, `SELECT id, runner_id FROM claims WHERE challenge_deadline <= $1 AND state = 'challenge_window'
		ORDER BY challenge_deadline LIMIT $2`, now)
	if err != nil {
		return nil, 0, err
	}
	return db.applyEach(ctx, ds, func(tx *sql.Tx, d due) (bool, error) {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = 'settled',
			outcome = (SELECT outcome FROM runs WHERE runs.claim_id = claims.id), settled_at = $1, updated_at = $1
			WHERE id = $2 AND state = 'challenge_window' AND challenge_deadline <= $1`, ms(now), d.claim)
		if err != nil {
			return false, err
		}
		if c, _ := res.RowsAffected(); c != 1 {
			return false, nil
		}
		return true, addEvent(ctx, tx, d.claim, dotlab.StateSettled, now, "challenge window closed without disagreement")
	})
}
