package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dotlab/dotlab"
)

var (
	_ dotlab.SummaryService  = (*DB)(nil)
	_ dotlab.ActivityService = (*DB)(nil)
)

// ClaimSummary counts claims by state (every state present, zeros included)
// and returns the recent (1-50; 10 when recent <= 0) latest settled claims,
// newest settled_at first (then newest id), without their manifests.
func (db *DB) ClaimSummary(ctx context.Context, recent int) (*dotlab.Summary, error) {
	switch {
	case recent <= 0:
		recent = 10
	case recent > 50:
		recent = 50
	}
	s := &dotlab.Summary{ClaimsByState: make(map[dotlab.ClaimState]int, len(dotlab.ClaimStates)), RecentlySettled: []*dotlab.Claim{}}
	for _, st := range dotlab.ClaimStates {
		s.ClaimsByState[st] = 0
	}
	rows, err := db.r.QueryContext(ctx, `SELECT state, COUNT(*) FROM claims GROUP BY state`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var st dotlab.ClaimState
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, err
		}
		s.ClaimsByState[st] += n
		s.Total += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.RecentlySettled, err = db.latestSettled(ctx, recent, scanClaimShort)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// LatestSettled returns the limit (1-50; 50 when limit <= 0 or above)
// latest settled claims with their manifests, newest settled_at first (then
// newest id): the Atom feed's entries (web: /feed.atom).
func (db *DB) LatestSettled(ctx context.Context, limit int) ([]*dotlab.Claim, error) {
	if limit <= 0 || limit > 50 {
		limit = 50
	}
	return db.latestSettled(ctx, limit, db.scanClaim)
}

// latestSettled reads the limit latest settled claims with scan. The index
// claims_settled (settled_at, number) WHERE settled_at IS NOT NULL is walked
// backwards, no sort. Ties go to the newer claim (number, the numeric id:
// DL-10000 is newer than DL-9999).
func (db *DB) latestSettled(ctx context.Context, limit int, scan func(rowScanner) (*dotlab.Claim, error)) ([]*dotlab.Claim, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE settled_at IS NOT NULL
		ORDER BY settled_at DESC, number DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*dotlab.Claim{}
	for rows.Next() {
		c, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// activitySQL is an agent's record as one newest-first stream. Each branch
// walks an index that leads with its agent column and then its time
// (migration 00005) backwards and stops after limit rows, so the cost
// follows the limit, not the length of the agent's history. ord breaks
// ties within a millisecond in lifecycle order (offered before accepted
// before the run or the close), so that newest-first is also
// lifecycle-reversed and both engines agree; within one branch ord is
// constant, so a branch's first limit rows are all it can contribute.
const activitySQL = `SELECT at, kind, claim_id, ref, detail FROM (
	SELECT * FROM (SELECT offered_at AS at, 1 AS ord, 'job_offered' AS kind, claim_id, '' AS ref, '' AS detail
		FROM jobs WHERE agent_id = $1 ORDER BY offered_at DESC, claim_id DESC LIMIT $2) offered
	UNION ALL
	SELECT * FROM (SELECT accepted_at, 2, 'job_accepted', claim_id, '', ''
		FROM jobs WHERE agent_id = $1 AND accepted_at IS NOT NULL ORDER BY accepted_at DESC, claim_id DESC LIMIT $2) accepted
	UNION ALL
	SELECT * FROM (SELECT closed_at, 4,
			CASE state WHEN 'declined' THEN 'job_declined' WHEN 'expired' THEN 'job_expired' ELSE 'job_abandoned' END,
			claim_id, '', CASE WHEN state = 'declined' THEN reason ELSE '' END
		FROM jobs WHERE agent_id = $1 AND closed_at IS NOT NULL AND state IN ('declined', 'expired', 'abandoned')
		ORDER BY closed_at DESC, claim_id DESC LIMIT $2) closed
	UNION ALL
	SELECT * FROM (SELECT published_at, 3, 'run', claim_id, id, outcome
		FROM runs WHERE runner_id = $1 ORDER BY published_at DESC, claim_id DESC LIMIT $2) run
	UNION ALL
	SELECT * FROM (SELECT created_at, 5, 'challenge', claim_id, id, outcome
		FROM challenges WHERE challenger_id = $1 ORDER BY created_at DESC, claim_id DESC LIMIT $2) challenge
	UNION ALL
	SELECT * FROM (SELECT created_at, 6, 'vote', claim_id, '', vote
		FROM votes WHERE reviewer_id = $1 ORDER BY created_at DESC, claim_id DESC LIMIT $2) vote
	UNION ALL
	SELECT * FROM (SELECT created_at, 7, 'message', claim_id, id, type
		FROM lab_messages WHERE agent_id = $1 ORDER BY created_at DESC, claim_id DESC, id DESC LIMIT $2) message
) a ORDER BY at DESC, ord DESC, claim_id DESC, ref DESC LIMIT $2`

// AgentActivity returns at most limit (1-200; 50 when limit <= 0) entries of
// the agent's record, newest first: job offers and what became of them,
// runs, challenges, votes and lab messages. ENOTFOUND when the agent does not
// exist.
//
// A job accepted and then abandoned shows job_accepted as well as
// job_abandoned (it was accepted); a published job shows job_accepted and
// the run.
func (db *DB) AgentActivity(ctx context.Context, agentID string, limit int) ([]dotlab.Activity, error) {
	switch {
	case limit <= 0:
		limit = 50
	case limit > 200:
		limit = 200
	}
	var one int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM agents WHERE id = $1`, agentID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.NoAgent(agentID)
	} else if err != nil {
		return nil, err
	}
	rows, err := db.r.QueryContext(ctx, activitySQL, agentID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dotlab.Activity{}
	for rows.Next() {
		var a dotlab.Activity
		var at int64
		if err := rows.Scan(&at, &a.Kind, &a.ClaimID, &a.Ref, &a.Detail); err != nil {
			return nil, err
		}
		a.At = fromMS(at)
		out = append(out, a)
	}
	return out, rows.Err()
}
