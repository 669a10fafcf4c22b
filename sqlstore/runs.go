package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

var _ store.Writer = (*DB)(nil)

// AddRun applies a run's publication (store.RunWrite): the claim moves out
// of assigned or running only while w.RunnerID holds the job and its
// publish deadline is after w.At; then the run row, the job's end, the
// claim's history and w.Log are written in the same transaction. applied is
// false, and nothing is written, when the claim moved meanwhile.
func (db *DB) AddRun(ctx context.Context, w store.RunWrite) (bool, error) {
	t := w.Transition
	applied := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if !w.ChallengeDeadline.IsZero() {
			res, err = tx.ExecContext(ctx, `UPDATE claims SET state = $6, run_id = $1, challenge_deadline = $2,
				publish_deadline = NULL, updated_at = $3
				WHERE id = $4 AND runner_id = $5 AND state IN (`+sources(t.Event)+`) AND publish_deadline > $3`,
				w.RunID, ms(w.ChallengeDeadline), ms(w.At), w.ClaimID, w.RunnerID, t.To)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE claims SET state = $6, run_id = $1, outcome = $2, settled_at = $3,
				publish_deadline = NULL, updated_at = $3
				WHERE id = $4 AND runner_id = $5 AND state IN (`+sources(t.Event)+`) AND publish_deadline > $3`,
				w.RunID, w.Outcome, ms(w.At), w.ClaimID, w.RunnerID, t.To)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		applied = true
		var logsSHA sql.NullString
		if w.LogsSHA256 != "" {
			logsSHA = sql.NullString{String: w.LogsSHA256, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, claim_id, runner_id, outcome, body, comparisons, published_at, logs_sha256)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, w.RunID, w.ClaimID, w.RunnerID, w.Outcome, string(w.Body), string(w.Comparisons), ms(w.At), logsSHA); err != nil {
			return err
		}
		if err := pinOutputListing(ctx, tx, w.ClaimID, w.RunnerID, w.OutputListing, w.RunID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $4, closed_at = $1
			WHERE claim_id = $2 AND agent_id = $3 AND state = $5`, ms(w.At), w.ClaimID, w.RunnerID, t.JobTo, t.JobFrom); err != nil {
			return err
		}
		if err := db.addHistory(ctx, tx, w.ClaimID, t, w.At, w.History...); err != nil {
			return err
		}
		if err := useStatement(ctx, tx, w.ClaimID, w.Statement, w.At); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	return applied, err
}

// runColumns are a run's columns with its claim's state, deadline and final
// outcome, and the claim's first disagreeing challenge (the one whose
// outcome the challenger side yields, dotlab.FirstDisagreeing).
const runColumns = `r.id, r.claim_id, r.runner_id, r.outcome, r.body, r.comparisons, r.published_at, c.state, c.challenge_deadline,
	COALESCE(c.outcome, ''), COALESCE(r.logs_sha256, ''), r.logs_uploaded_at, COALESCE(r.log_coverage, ''),
	COALESCE((SELECT ch.id FROM challenges ch WHERE ch.claim_id = r.claim_id AND ch.agrees = 0
		ORDER BY ch.created_at, ch.id LIMIT 1), '')`

func scanRun(row rowScanner) (*dotlab.Run, error) {
	var r dotlab.Run
	var body, comps, final, coverage, disagreeing string
	var published int64
	var deadline, uploaded sql.NullInt64
	if err := row.Scan(&r.ID, &r.ClaimID, &r.RunnerID, &r.Outcome, &body, &comps, &published, &r.Status, &deadline,
		&final, &r.LogsSHA256, &uploaded, &coverage, &disagreeing); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(body), &r.Body); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(comps), &r.Comparisons); err != nil {
		return nil, err
	}
	if r.Comparisons == nil {
		r.Comparisons = []dotlab.Comparison{}
	}
	r.PublishedAt = fromMS(published)
	r.SignedBy = r.Body.Envelope.SignedBy()
	if r.Status == dotlab.StateSettled {
		r.SettledOutcome = dotlab.Outcome(final)
		r.Overturned = r.SettledOutcome != r.Outcome
	}
	if r.Outcome.Compared() {
		r.ChallengeDeadline = fromNullMS(deadline)
	}
	settle(&r, dotlab.Outcome(final), disagreeing)
	r.LogsUploadedAt = fromNullMS(uploaded)
	if coverage != "" {
		r.LogCoverage = &dotlab.LogCoverage{}
		if err := json.Unmarshal([]byte(coverage), r.LogCoverage); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// settle fills how the claim settled against run r (docs/protocol.md §6
// "The run record"): its final outcome once settled, whether that
// overturned the run, the dispute once a challenge disagreed, and the
// challenge whose outcome prevailed.
func settle(r *dotlab.Run, final dotlab.Outcome, disagreeing string) {
	if disagreeing != "" {
		r.DisputeID = r.ClaimID
	}
	if r.Status != dotlab.StateSettled || final == "" {
		return
	}
	r.SettledOutcome = final
	if final != r.Outcome {
		r.Overturned = true
		r.OverturnedBy = disagreeing
	}
}

// FindRun returns a run or ENOTFOUND.
func (db *DB) FindRun(ctx context.Context, id string) (*dotlab.Run, error) {
	return db.findRun(ctx, db.r, id)
}

func (db *DB) findRun(ctx context.Context, q querier, id string) (*dotlab.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs r JOIN claims c ON c.id = r.claim_id WHERE r.id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.NoRun(id)
	}
	return r, err
}

// FindRuns lists runs in claim order, optionally only those whose claim is in
// a state (e.g. challenge_window). After is a claim id. The listing carries
// no values of the runs (dotlab.RunListing): the query reads no run body
// and no comparisons.
func (db *DB) FindRuns(ctx context.Context, p dotlab.Page) ([]*dotlab.RunListing, error) {
	f, after, err := p.Check("status")
	if err != nil {
		return nil, err
	}
	q := `SELECT r.id, r.claim_id, c.title, c.requires, r.outcome, c.state, r.published_at, c.challenge_deadline, COALESCE(c.outcome, '')
		FROM runs r JOIN claims c ON c.id = r.claim_id WHERE c.number > $1`
	args := []any{after}
	if f.State != "" {
		q += ` AND c.state = $3`
		args = append(args, f.Limit, f.State)
	} else {
		args = append(args, f.Limit)
	}
	rows, err := db.r.QueryContext(ctx, q+` ORDER BY c.number LIMIT $2`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*dotlab.RunListing{}
	for rows.Next() {
		r, err := scanRunListing(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func scanRunListing(row rowScanner) (*dotlab.RunListing, error) {
	var r dotlab.RunListing
	var req string
	var published int64
	var deadline sql.NullInt64
	var final string
	if err := row.Scan(&r.ID, &r.ClaimID, &r.Title, &req, &r.Outcome, &r.Status, &published, &deadline, &final); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(req), &r.Requires); err != nil {
		return nil, err
	}
	if r.Requires == nil {
		r.Requires = []string{}
	}
	r.PublishedAt = fromMS(published)
	if r.Status == dotlab.StateSettled && final != "" {
		r.SettledOutcome = dotlab.Outcome(final)
		r.Overturned = r.SettledOutcome != r.Outcome
	}
	if r.Outcome.Compared() {
		r.ChallengeDeadline = fromNullMS(deadline)
	}
	return &r, nil
}
