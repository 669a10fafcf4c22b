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

// drawBatch is how many candidates one draw step reads from the index.
const drawBatch = 32

// NextJob implements the draw of docs/mechanism.md §1: a claim is drawn at
// random among funded claims with no open offer, on which the caller holds no
// role, was never offered to the caller before, and whose `requires` the
// caller's capabilities cover; it is offered for the accept window.
//
// Each funded claim carries a random draw key (re-drawn whenever it returns
// to the pool). The draw picks a uniform random point and takes the first
// eligible claim at or after it in key order, wrapping around once: an index
// walk of O(log n + skipped), not a table scan. Two agents racing for one
// claim: the offer is a conditional UPDATE (state funded, no runner), so
// exactly one wins and the other moves on to the next candidate.
//
// An agent holds at most one open offer: while it has one, NextJob returns
// that same offer.
func (db *DB) NextJob(ctx context.Context, agent *dotlab.Agent) (*dotlab.Job, bool, error) {
	now := db.now()
	if j, err := db.openOffer(ctx, agent.ID, now); err == nil {
		return j, true, nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	start := newDrawKey()
	// Pass 1 walks [start, end); pass 2 wraps around to [0, start).
	for pass := 0; pass < 2; pass++ {
		lo, hi := start, int64(1<<62)
		if pass == 1 {
			lo, hi = 0, start
		}
		for {
			cands, err := db.drawCandidates(ctx, agent.ID, lo, hi)
			if err != nil {
				return nil, false, err
			}
			for _, c := range cands {
				if !agent.Has(c.requires) {
					continue
				}
				j, won, err := db.offer(ctx, c.id, agent.ID, now)
				if err != nil {
					return nil, false, err
				}
				if won {
					return j, true, nil
				}
			}
			if len(cands) < drawBatch {
				break
			}
			lo = cands[len(cands)-1].key + 1
		}
	}
	return nil, false, nil
}

type candidate struct {
	id       string
	key      int64
	requires []string
}

func (db *DB) drawCandidates(ctx context.Context, agentID string, lo, hi int64) ([]candidate, error) {
	// state = 'funded' (dotlab.Sources(dotlab.EventOffer)) is written out so
	// that SQLite matches the partial index claims_draw.
	rows, err := db.r.QueryContext(ctx, `SELECT c.id, c.draw_key, c.requires FROM claims c
		WHERE c.state = 'funded' AND c.runner_id IS NULL AND c.draw_key >= $1 AND c.draw_key < $2
		  AND NOT EXISTS (SELECT 1 FROM roles r WHERE r.claim_id = c.id AND r.agent_id = $3)
		  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.claim_id = c.id AND j.agent_id = $3)
		ORDER BY c.draw_key LIMIT $4`, lo, hi, agentID, drawBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		var req string
		if err := rows.Scan(&c.id, &c.key, &req); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(req), &c.requires); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// offer tries to take claimID for agentID; won is false when another agent
// took it first.
func (db *DB) offer(ctx context.Context, claimID, agentID string, now time.Time) (*dotlab.Job, bool, error) {
	t, err := transition(dotlab.StateFunded, dotlab.EventOffer)
	if err != nil {
		return nil, false, err
	}
	expires := now.Add(db.windows.Accept)
	jobID := newID("job_")
	won := false
	err = db.tx(ctx, func(tx *sql.Tx) error {
		// Lock the agent's row (PostgreSQL; SQLite writers are serial) so
		// that concurrent draws by one agent cannot each take an offer.
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET created_at = created_at WHERE id = $1`, agentID); err != nil {
			return err
		}
		var open int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE agent_id = $1 AND state = 'offered' AND offer_expires_at > $2`,
			agentID, ms(now)).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return errOpenOffer
		}
		res, err := tx.ExecContext(ctx, `UPDATE claims SET runner_id = $1, offer_expires_at = $2, updated_at = $3
			WHERE id = $4 AND state = $5 AND runner_id IS NULL`, agentID, ms(expires), ms(now), claimID, t.From)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		won = true
		db.announceClaim(tx, claimID)
		_, err = tx.ExecContext(ctx, `INSERT INTO jobs (id, claim_id, agent_id, state, offered_at, offer_expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, jobID, claimID, agentID, t.JobTo, ms(now), ms(expires))
		return err
	})
	if errors.Is(err, errOpenOffer) {
		// A concurrent draw by the same agent won: return that offer.
		j, err := db.openOffer(ctx, agentID, now)
		return j, err == nil, err
	}
	if err != nil || !won {
		return nil, false, err
	}
	j, err := db.jobFor(ctx, db.r, claimID, agentID)
	return j, err == nil, err
}

var errOpenOffer = errors.New("agent already holds an open offer")

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
