package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// AddLogs attaches a run's logs (store.LogsWrite) once: only while the run
// pins w.SHA256 and has none attached; applied is false when they were
// attached meanwhile.
func (db *DB) AddLogs(ctx context.Context, w store.LogsWrite) (bool, error) {
	complete := 0
	if w.Complete {
		complete = 1
	}
	at := ms(w.At)
	applied := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		// The conditional UPDATE makes the first upload the only one; a
		// concurrent one of the same bytes finds it done.
		res, err := tx.ExecContext(ctx, `UPDATE runs SET logs_uploaded_at = $1, log_coverage = $2, logs_complete = $3
			WHERE id = $4 AND logs_sha256 = $5 AND logs_uploaded_at IS NULL`, at, string(w.Coverage), complete, w.RunID, w.SHA256)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		applied = true
		db.announceClaim(tx, w.ClaimID) // the run's record shows its logs
		// Replaces a draft uploaded before publishing under the old rules.
		if _, err = tx.ExecContext(ctx, `INSERT INTO run_logs (claim_id, agent_id, logs, uploaded_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (claim_id, agent_id) DO UPDATE SET logs = excluded.logs, uploaded_at = excluded.uploaded_at`,
			w.ClaimID, w.AgentID, string(w.Logs), at); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	return applied, err
}

// JobLogs returns the log attached to the claim's run, or ENOTFOUND.
func (db *DB) JobLogs(ctx context.Context, claimID string) ([]byte, error) {
	var logs string
	err := db.r.QueryRowContext(ctx, `SELECT l.logs FROM run_logs l JOIN runs r ON r.claim_id = l.claim_id AND r.runner_id = l.agent_id
		WHERE l.claim_id = $1 AND r.logs_uploaded_at IS NOT NULL`, claimID).Scan(&logs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "no logs uploaded for %s by its runner: the run's logs_uri says where its logs are (%s gives its run_url)", claimID, dotlab.Go(dotlab.StepClaim, claimID))
	}
	return []byte(logs), err
}
