package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
)

var _ dotlab.ChallengeService = (*DB)(nil)

// CreateChallenge records an independent rerun of a run in its challenge
// window (DESIGN.md "Lifecycle"). The server recomputes the challenger's
// comparisons; agrees must equal (challenger's outcome == run's outcome). A
// disagreeing challenge must name in its notes each comparison that differs
// and by how much, and moves the claim to disputed. The runner, the
// submitter, collaborators and reviewers of the claim cannot challenge it
// (403 role_conflict); one challenge per agent per claim (409 conflict).
func (db *DB) CreateChallenge(ctx context.Context, agentID string, body *dotlab.ChallengeBody, raw []byte) (*dotlab.Challenge, error) {
	claimID, err := db.challengeTarget(ctx, body)
	if err != nil {
		return nil, err
	}
	c, err := db.FindClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	if body.JobID != "" && body.JobID != c.ID {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.job_id: %q is not the challenged claim %s (leave it empty or give the claim id)", body.JobID, c.ID)
	}
	if body.Agrees == nil {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.agrees: required: true when your outcome equals the run's, false otherwise")
	}
	now := db.now()
	if err := db.challengeable(ctx, c, agentID, now); err != nil {
		return nil, err
	}
	run, err := db.FindRun(ctx, c.RunID)
	if err != nil {
		return nil, err
	}
	comps, err := dotlab.EvaluateRun(c.Manifest, &body.RunBody)
	if err != nil {
		return nil, err
	}
	same := body.Outcome == run.Outcome
	if *body.Agrees != same {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.agrees: is %v but your outcome %s %s the run's outcome %s: set agrees to %v",
			*body.Agrees, body.Outcome, map[bool]string{true: "equals", false: "differs from"}[same], run.Outcome, same)
	}
	diffs := dotlab.Differences(run.Comparisons, comps)
	if !same {
		if err := dotlab.CheckDisagreementNotes(body.Notes, diffs); err != nil {
			return nil, err
		}
	}
	if comps == nil {
		comps = []dotlab.Comparison{}
	}
	compJSON, err := json.Marshal(comps)
	if err != nil {
		return nil, fmt.Errorf("encode comparisons: %w", err)
	}
	diffJSON, err := json.Marshal(diffs)
	if err != nil {
		return nil, fmt.Errorf("encode differences: %w", err)
	}
	if raw == nil {
		if raw, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode challenge: %w", err)
		}
	}
	ch := &dotlab.Challenge{ID: newID("ch_"), ClaimID: c.ID, RunID: run.ID, ChallengerID: agentID, Agrees: same,
		Outcome: body.Outcome, Comparisons: comps, Differences: diffs, Notes: body.Notes, CreatedAt: now.Truncate(time.Millisecond)}
	locked := false
	err = db.tx(ctx, func(tx *sql.Tx) error {
		// Lock the claim row (PostgreSQL) while the window is open, so the
		// move to disputed and the settlement cannot interleave.
		res, err := tx.ExecContext(ctx, `UPDATE claims SET updated_at = $1 WHERE id = $2
			AND state IN ('challenge_window', 'disputed') AND challenge_deadline > $1`, ms(now), c.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		locked = true
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'challenger', $3)`,
			c.ID, agentID, ms(now)); err != nil {
			return err
		}
		agrees := int64(0)
		if same {
			agrees = 1
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO challenges (id, claim_id, run_id, challenger_id, agrees, outcome, body, comparisons, differences, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, ch.ID, c.ID, run.ID, agentID, agrees, body.Outcome, string(raw),
			string(compJSON), string(diffJSON), ms(now)); err != nil {
			return err
		}
		if same {
			return nil
		}
		res, err = tx.ExecContext(ctx, `UPDATE claims SET state = 'disputed', updated_at = $1 WHERE id = $2 AND state = 'challenge_window'`, ms(now), c.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return addEvent(ctx, tx, c.ID, dotlab.StateDisputed, now, "challenge "+ch.ID+" disagrees: "+string(body.Outcome))
		}
		return nil
	})
	if isUniqueViolation(err) {
		return nil, dotlab.Errorf(dotlab.ECONFLICT, "you already challenged %s (or took another role on it meanwhile): one challenge per agent per claim", c.ID)
	}
	if err != nil {
		return nil, err
	}
	if !locked {
		return nil, dotlab.Errorf(dotlab.EWINDOWCLOSED, "the challenge window of %s is closed", c.ID)
	}
	return ch, nil
}

func (db *DB) challengeTarget(ctx context.Context, body *dotlab.ChallengeBody) (string, error) {
	if body.RunID != "" {
		var claimID string
		err := db.r.QueryRowContext(ctx, `SELECT claim_id FROM runs WHERE id = $1`, body.RunID).Scan(&claimID)
		if errors.Is(err, sql.ErrNoRows) {
			return "", dotlab.Errorf(dotlab.ENOTFOUND, "no run %q", body.RunID)
		} else if err != nil {
			return "", err
		}
		if body.ClaimID != "" && body.ClaimID != claimID {
			return "", dotlab.Errorf(dotlab.EINVALID, "$.run_id: run %s belongs to %s, not to claim_id %s", body.RunID, claimID, body.ClaimID)
		}
		return claimID, nil
	}
	if body.ClaimID == "" {
		return "", dotlab.Errorf(dotlab.EINVALID, "$.claim_id: required (the claim whose run you rerun; run_id is accepted too)")
	}
	return body.ClaimID, nil
}

// challengeable checks the window and the caller's roles.
func (db *DB) challengeable(ctx context.Context, c *dotlab.Claim, agentID string, now time.Time) error {
	if c.State != dotlab.StateChallengeWindow && c.State != dotlab.StateDisputed {
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "%s is not in its challenge window (state %s)", c.ID, c.State)
	}
	if c.ChallengeDeadline != nil && !c.ChallengeDeadline.After(now) {
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the challenge window of %s closed at %s", c.ID, c.ChallengeDeadline.Format(time.RFC3339))
	}
	role, err := db.roleOf(ctx, db.r, c.ID, agentID)
	if err != nil {
		return err
	}
	switch role {
	case "":
		return nil
	case dotlab.RoleChallenger:
		return dotlab.Errorf(dotlab.ECONFLICT, "you already challenged %s: one challenge per agent per claim", c.ID)
	}
	return dotlab.Errorf(dotlab.EROLECONFLICT, "you are the %s of %s: an agent holds one role per claim, so you cannot challenge it", role, c.ID)
}

const challengeColumns = `id, claim_id, run_id, challenger_id, agrees, outcome, body, comparisons, differences, created_at`

func scanChallenge(row rowScanner) (*dotlab.Challenge, error) {
	var ch dotlab.Challenge
	var agrees, created int64
	var body, comps, diffs string
	if err := row.Scan(&ch.ID, &ch.ClaimID, &ch.RunID, &ch.ChallengerID, &agrees, &ch.Outcome, &body, &comps, &diffs, &created); err != nil {
		return nil, err
	}
	ch.Agrees = agrees == 1
	ch.CreatedAt = fromMS(created)
	var b dotlab.ChallengeBody
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		return nil, fmt.Errorf("challenge %s body: %w", ch.ID, err)
	}
	ch.Notes = b.Notes
	if err := json.Unmarshal([]byte(comps), &ch.Comparisons); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(diffs), &ch.Differences); err != nil {
		return nil, err
	}
	return &ch, nil
}

// FindChallenges lists a claim's challenges in the order they were posted.
func (db *DB) FindChallenges(ctx context.Context, claimID string) ([]*dotlab.Challenge, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+challengeColumns+` FROM challenges WHERE claim_id = $1 ORDER BY created_at, id`, claimID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*dotlab.Challenge{}
	for rows.Next() {
		ch, err := scanChallenge(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ch)
	}
	return out, rows.Err()
}
