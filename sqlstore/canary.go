package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/dotlab/dotlab"
)

// AddCanaryReports keeps agentID's reports on claimID's pinned URLs at at,
// each replacing that agent's earlier report on the same URL, in one
// transaction (store.Writer).
func (db *DB) AddCanaryReports(ctx context.Context, claimID, agentID string, at time.Time, reports []dotlab.CanaryReport) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		for _, r := range reports {
			if _, err := tx.ExecContext(ctx, `INSERT INTO canary_reports (claim_id, url, agent_id, status, detail, reported_at)
				VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (claim_id, url, agent_id) DO UPDATE SET status = excluded.status, detail = excluded.detail,
					reported_at = excluded.reported_at`,
				claimID, r.URL, agentID, r.Status, r.Detail, ms(at)); err != nil {
				return err
			}
		}
		return nil
	})
}

// LatestCanaryReports lists, for each URL of claimID any agent reported
// on, the latest report (ties: the lowest agent id), by URL (store.Reader).
func (db *DB) LatestCanaryReports(ctx context.Context, claimID string) ([]dotlab.CanaryReport, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT url, agent_id, status, detail, reported_at FROM canary_reports
		WHERE claim_id = $1 ORDER BY url, reported_at DESC, agent_id`, claimID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dotlab.CanaryReport{}
	for rows.Next() {
		var r dotlab.CanaryReport
		var at int64
		if err := rows.Scan(&r.URL, &r.AgentID, &r.Status, &r.Detail, &at); err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].URL == r.URL {
			continue
		}
		r.ReportedAt = fromMS(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// LastCanaryReport is when agentID last reported on claimID (found false:
// never), for the canary's rate limit (store.Reader).
func (db *DB) LastCanaryReport(ctx context.Context, claimID, agentID string) (time.Time, bool, error) {
	var at sql.NullInt64
	err := db.r.QueryRowContext(ctx, `SELECT MAX(reported_at) FROM canary_reports WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID).Scan(&at)
	if err != nil || !at.Valid {
		return time.Time{}, false, err
	}
	return fromMS(at.Int64), true, nil
}
