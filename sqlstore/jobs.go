package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// The job draw (docs/mechanism.md §1) is the protocol's
// (protocol.Service.NextJob); the store keeps the draw index and the
// conditional offer. Each funded claim carries a random draw key
// (re-drawn whenever it returns to the pool); DrawCandidates walks the
// keys from a point in order: an index walk of O(log n + skipped), not a
// table scan.

// DrawCandidates lists up to limit funded claims without an open offer,
// with draw keys in [lo, hi), on which agentID holds no role and was never
// offered, in key order (store.Reader).
func (db *DB) DrawCandidates(ctx context.Context, agentID string, lo, hi int64, limit int) ([]store.Candidate, error) {
	// state = 'funded' (dotlab.Sources(dotlab.EventOffer)) is written out so
	// that SQLite matches the partial index claims_draw.
	rows, err := db.r.QueryContext(ctx, `SELECT c.id, c.draw_key, c.requires FROM claims c
		WHERE c.state = 'funded' AND c.runner_id IS NULL AND c.draw_key >= $1 AND c.draw_key < $2
		  AND NOT EXISTS (SELECT 1 FROM roles r WHERE r.claim_id = c.id AND r.agent_id = $3)
		  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.claim_id = c.id AND j.agent_id = $3)
		ORDER BY c.draw_key LIMIT $4`, lo, hi, agentID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Candidate
	for rows.Next() {
		var c store.Candidate
		var req string
		if err := rows.Scan(&c.ClaimID, &c.Key, &req); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(req), &c.Requires); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// OpenOffer is agentID's open offer at now; found is false for none
// (store.Reader).
func (db *DB) OpenOffer(ctx context.Context, agentID string, now time.Time) (*dotlab.Job, bool, error) {
	j, err := db.openOffer(ctx, agentID, now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	return j, err == nil, err
}

// AddOffer offers a claim to an agent (store.OfferWrite): under the
// agent's row lock, only while the agent holds no open offer and the claim
// is still free. won is false when another agent took the claim first;
// store.ErrClaimBusy (nothing written) when, on PostgreSQL without w.Wait,
// another transaction holds the free claim's row (offerClaimSQL);
// ErrOpenOffer when a concurrent draw by the same agent won an offer.
func (db *DB) AddOffer(ctx context.Context, w store.OfferWrite) (bool, error) {
	t := w.Transition
	won := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		// Lock the agent's row (PostgreSQL; SQLite writers are serial) so
		// that concurrent draws by one agent cannot each take an offer.
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET created_at = created_at WHERE id = $1`, w.AgentID); err != nil {
			return err
		}
		var open int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE agent_id = $1 AND state = 'offered' AND offer_expires_at > $2`,
			w.AgentID, ms(w.At)).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return store.ErrOpenOffer
		}
		res, err := tx.ExecContext(ctx, db.offerClaimSQL(w.Wait), w.AgentID, ms(w.Expires), ms(w.At), w.ClaimID, t.From)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return db.skippedClaim(ctx, tx, w)
		}
		won = true
		db.announceClaim(tx, w.ClaimID)
		if _, err = tx.ExecContext(ctx, `INSERT INTO jobs (id, claim_id, agent_id, state, offered_at, offer_expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, newID("job_"), w.ClaimID, w.AgentID, t.JobTo, ms(w.At), ms(w.Expires)); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	return won, err
}

// offerClaimSQL is the offer's conditional claim update. On PostgreSQL,
// unless wait, a claim whose row another transaction holds (a concurrent
// draw offering it, most often) is skipped, not waited for: the update
// finds no row and AddOffer answers store.ErrClaimBusy (skippedClaim), so
// the draw tries its next candidate at once instead of queueing behind the
// other transaction's commit (bench/README.md, issue 25: 17 ms a draw at
// 64 drawers), and comes back to this one with wait only if it wins no
// other. The lock taken is the UPDATE's own (FOR NO KEY UPDATE), so a
// transaction that only references the claim (a role, a room member or
// message, a job: the foreign key's FOR KEY SHARE) does not hide it from
// the draw. SQLite's writers are serial: no row is ever held.
func (db *DB) offerClaimSQL(wait bool) string {
	if db.dialect == Postgres && !wait {
		return `UPDATE claims SET runner_id = $1, offer_expires_at = $2, updated_at = $3
			WHERE id = (SELECT id FROM claims WHERE id = $4 AND state = $5 AND runner_id IS NULL FOR NO KEY UPDATE SKIP LOCKED)`
	}
	return `UPDATE claims SET runner_id = $1, offer_expires_at = $2, updated_at = $3
			WHERE id = $4 AND state = $5 AND runner_id IS NULL`
}

// skippedClaim tells, after an offer's update found no row, a claim taken
// (nil: the offer is lost) from one skipped because its row was held while
// it is still free (store.ErrClaimBusy; PostgreSQL without w.Wait only).
func (db *DB) skippedClaim(ctx context.Context, tx *sql.Tx, w store.OfferWrite) error {
	if db.dialect != Postgres || w.Wait {
		return nil
	}
	var free bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM claims WHERE id = $1 AND state = $2 AND runner_id IS NULL)`,
		w.ClaimID, w.Transition.From).Scan(&free); err != nil {
		return err
	}
	if free {
		return store.ErrClaimBusy
	}
	return nil
}

const jobColumns = `j.claim_id, j.agent_id, j.state, j.offered_at, j.offer_expires_at, j.accepted_at, j.publish_deadline, j.reason, c.title, c.requires`

func scanJob(row rowScanner) (*dotlab.Job, error) {
	var j dotlab.Job
	var offered, expires int64
	var accepted, deadline sql.NullInt64
	var req string
	if err := row.Scan(&j.ClaimID, &j.AgentID, &j.State, &offered, &expires, &accepted, &deadline, &j.Reason, &j.Title, &req); err != nil {
		return nil, err
	}
	j.ID = j.ClaimID
	j.OfferedAt, j.OfferExpiresAt = fromMS(offered), fromMS(expires)
	j.AcceptedAt, j.PublishDeadline = fromNullMS(accepted), fromNullMS(deadline)
	if err := json.Unmarshal([]byte(req), &j.Requires); err != nil {
		return nil, err
	}
	j.Reasonless = j.State == dotlab.JobDeclined && dotlab.ReasonlessDecline(j.Reason)
	return &j, nil
}

// jobFor returns the latest job of agentID on claimID.
func (db *DB) jobFor(ctx context.Context, q querier, claimID, agentID string) (*dotlab.Job, error) {
	return scanJob(q.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs j JOIN claims c ON c.id = j.claim_id
		WHERE j.claim_id = $1 AND j.agent_id = $2 ORDER BY j.offered_at DESC, j.id DESC LIMIT 1`, claimID, agentID))
}

func (db *DB) openOffer(ctx context.Context, agentID string, now time.Time) (*dotlab.Job, error) {
	return scanJob(db.r.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs j JOIN claims c ON c.id = j.claim_id
		WHERE j.agent_id = $1 AND j.state = 'offered' AND j.offer_expires_at > $2
		ORDER BY j.offered_at DESC LIMIT 1`, agentID, ms(now)))
}

// LatestJob is agentID's latest job on claimID (store.Reader).
func (db *DB) LatestJob(ctx context.Context, claimID, agentID string) (*dotlab.Job, bool, error) {
	j, err := db.jobFor(ctx, db.r, claimID, agentID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	return j, err == nil, err
}

// AddAccept applies an acceptance (store.AcceptWrite) while agentID holds
// the open offer: the claim assigned with its publish deadline, the job
// accepted, the runner role, the history and w.Log. A second role of the
// agent on the claim is ECONFLICT.
func (db *DB) AddAccept(ctx context.Context, w store.AcceptWrite) (bool, error) {
	t := w.Transition
	accepted := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET state = $5, offer_expires_at = NULL, publish_deadline = $1, updated_at = $2
			WHERE id = $3 AND state = $6 AND runner_id = $4 AND offer_expires_at > $2`, ms(w.PublishDeadline), ms(w.At), w.ClaimID, w.AgentID, t.To, t.From)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		accepted = true
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $5, accepted_at = $1, publish_deadline = $2
			WHERE claim_id = $3 AND agent_id = $4 AND state = $6`, ms(w.At), ms(w.PublishDeadline), w.ClaimID, w.AgentID, t.JobTo, t.JobFrom); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'runner', $3)`,
			w.ClaimID, w.AgentID, ms(w.At)); err != nil {
			return err
		}
		if err := db.addHistory(ctx, tx, w.ClaimID, t, w.At, w.History...); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	if isUniqueViolation(err) {
		return false, errSecondRole
	}
	return accepted, err
}

// AddDecline applies a decline (store.DeclineWrite) while agentID holds
// the open offer: the claim back in the pool with a new draw key, the job
// declined with its reason.
func (db *DB) AddDecline(ctx context.Context, w store.DeclineWrite) (bool, error) {
	t := w.Transition
	declined := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET runner_id = NULL, offer_expires_at = NULL, draw_key = $1, updated_at = $2
			WHERE id = $3 AND state = $5 AND runner_id = $4 AND offer_expires_at > $2`, newDrawKey(), ms(w.At), w.ClaimID, w.AgentID, t.From)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		declined = true
		db.announceClaim(tx, w.ClaimID)
		if _, err = tx.ExecContext(ctx, `UPDATE jobs SET state = $5, closed_at = $1, reason = $2
			WHERE claim_id = $3 AND agent_id = $4 AND state = $6`, ms(w.At), w.Reason, w.ClaimID, w.AgentID, t.JobTo, t.JobFrom); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	return declined, err
}
