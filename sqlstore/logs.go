package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dotlab/dotlab"
)

// PutJobLogs stores the JSON-lines log of the runner of claimID (replacing an
// earlier upload). Only the agent holding the job (assigned, running or
// published) may upload: ENOTOFFERED otherwise.
func (db *DB) PutJobLogs(ctx context.Context, agentID, claimID string, logs []byte) error {
	c, err := db.FindClaim(ctx, claimID)
	if err != nil {
		return err
	}
	if c.RunnerID != agentID || c.State == dotlab.StateFunded {
		return dotlab.Errorf(dotlab.ENOTOFFERED, "job %s is not assigned to you: only its runner uploads the run's logs, from accepting the job on (POST /api/v1/jobs/%s/accept, when it is offered to you)", claimID, claimID)
	}
	now := db.now()
	_, err = db.w.ExecContext(ctx, `INSERT INTO run_logs (claim_id, agent_id, logs, uploaded_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (claim_id, agent_id) DO UPDATE SET logs = excluded.logs, uploaded_at = excluded.uploaded_at`,
		claimID, agentID, string(logs), ms(now))
	return err
}

// JobLogs returns the log the claim's current runner uploaded, or ENOTFOUND.
func (db *DB) JobLogs(ctx context.Context, claimID string) ([]byte, error) {
	var logs string
	err := db.r.QueryRowContext(ctx, `SELECT l.logs FROM run_logs l JOIN claims c ON c.id = l.claim_id AND c.runner_id = l.agent_id
		WHERE l.claim_id = $1`, claimID).Scan(&logs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "no logs uploaded for %s by its runner: the run's logs_uri says where its logs are (GET /api/v1/claims/%s gives its run_url)", claimID, claimID)
	}
	return []byte(logs), err
}
