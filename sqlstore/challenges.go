package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
)

var _ dotlab.ChallengeService = (*DB)(nil)

// CreateChallenge records an independent rerun of a run in its challenge
// window (docs/mechanism.md §3). The server recomputes the challenger's
// comparisons; agrees must follow dotlab.Agrees (challenger's outcome ==
// run's outcome). A disagreeing challenge must name in its notes each
// comparison that differs and by how much, and moves the claim to disputed
// (dotlab.EventChallengeDisagree). The runner, the submitter, collaborators
// and reviewers of the claim cannot challenge it (403 role_conflict); one
// challenge per agent per claim (409 conflict).
func (db *DB) CreateChallenge(ctx context.Context, agentID string, body *dotlab.ChallengeBody, raw []byte) (*dotlab.Challenge, error) {
	c, run, now, err := db.challengedRun(ctx, agentID, body)
	if err != nil {
		return nil, err
	}
	comps, err := dotlab.EvaluateRun(c.Manifest, &body.RunBody)
	if err != nil {
		return nil, err
	}
	if err := dotlab.CheckAgrees(*body.Agrees, run.Outcome, body.Outcome); err != nil {
		return nil, err
	}
	agrees := dotlab.Agrees(run.Outcome, body.Outcome)
	diffs := dotlab.Differences(run.Comparisons, comps)
	if !agrees {
		if err := dotlab.CheckDisagreementNotes(body.Notes, diffs); err != nil {
			return nil, err
		}
	}
	if comps == nil {
		comps = []dotlab.Comparison{}
	}
	if raw == nil {
		if raw, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode challenge: %w", err)
		}
	}
	ch := &dotlab.Challenge{ID: newID("ch_"), ClaimID: c.ID, RunID: run.ID, ChallengerID: agentID, Agrees: agrees,
		Outcome: body.Outcome, Comparisons: comps, Differences: diffs, Notes: body.Notes, CreatedAt: now.Truncate(time.Millisecond),
		InputHashes: body.InputHashes, OutputHashes: body.OutputHashes, Envelope: body.Envelope, SignedBy: body.Envelope.SignedBy()}
	if err := db.insertChallenge(ctx, ch, raw, now); err != nil {
		return nil, err
	}
	return ch, nil
}

// challengedRun finds the claim and run a challenge body points at and
// checks that the caller may challenge it now.
func (db *DB) challengedRun(ctx context.Context, agentID string, body *dotlab.ChallengeBody) (*dotlab.Claim, *dotlab.Run, time.Time, error) {
	var now time.Time
	claimID, err := db.challengeTarget(ctx, body)
	if err != nil {
		return nil, nil, now, err
	}
	c, err := db.FindClaim(ctx, claimID)
	if err != nil {
		return nil, nil, now, err
	}
	if body.JobID != "" && body.JobID != c.ID {
		return nil, nil, now, dotlab.Errorf(dotlab.EINVALID, "$.job_id: %q is not the challenged claim %s (leave it empty or give the claim id)", body.JobID, c.ID)
	}
	if body.Agrees == nil {
		return nil, nil, now, dotlab.Errorf(dotlab.EINVALID, "$.agrees: required: true when your outcome equals the run's, false otherwise")
	}
	now = db.now()
	if err := db.challengeable(ctx, c, agentID, dotlab.ChallengeEvent(*body.Agrees), now); err != nil {
		return nil, nil, now, err
	}
	run, err := db.FindRun(ctx, c.RunID)
	return c, run, now, err
}

// insertChallenge stores ch and, when it is the first disagreeing one, moves
// the claim to disputed, in one transaction under the claim's row lock.
func (db *DB) insertChallenge(ctx context.Context, ch *dotlab.Challenge, raw []byte, now time.Time) error {
	ev := dotlab.ChallengeEvent(ch.Agrees)
	t, err := transition(dotlab.StateChallengeWindow, ev) // from disputed it moves nothing
	if err != nil {
		return err
	}
	compJSON, err := json.Marshal(ch.Comparisons)
	if err != nil {
		return fmt.Errorf("encode comparisons: %w", err)
	}
	diffJSON, err := json.Marshal(ch.Differences)
	if err != nil {
		return fmt.Errorf("encode differences: %w", err)
	}
	locked := false
	err = db.tx(ctx, func(tx *sql.Tx) error {
		// Lock the claim row (PostgreSQL) while the window is open, so the
		// move to disputed and the settlement cannot interleave.
		res, err := tx.ExecContext(ctx, `UPDATE claims SET updated_at = $1 WHERE id = $2
			AND state IN (`+sources(ev)+`) AND challenge_deadline > $1`, ms(now), ch.ClaimID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		locked = true
		db.announceClaim(tx, ch.ClaimID) // the run's record names the first disagreeing challenge
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'challenger', $3)`,
			ch.ClaimID, ch.ChallengerID, ms(now)); err != nil {
			return err
		}
		agrees := int64(0)
		if ch.Agrees {
			agrees = 1
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO challenges (id, claim_id, run_id, challenger_id, agrees, outcome, body, comparisons, differences, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, ch.ID, ch.ClaimID, ch.RunID, ch.ChallengerID, agrees, ch.Outcome, string(raw),
			string(compJSON), string(diffJSON), ms(now)); err != nil {
			return err
		}
		if t.Moves() {
			res, err = tx.ExecContext(ctx, `UPDATE claims SET state = $3, updated_at = $1 WHERE id = $2 AND state = $4`, ms(now), ch.ClaimID, t.To, t.From)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				if err := db.addHistory(ctx, tx, ch.ClaimID, t, now, "challenge "+ch.ID+" disagrees: "+string(ch.Outcome)); err != nil {
					return err
				}
			}
		}
		if err := db.logChallenge(ctx, tx, ch.ID); err != nil {
			return err
		}
		return db.logEnvelope(ctx, tx, tlogfmt.TypeChallenge, ch.ClaimID, ch.ID, ch.Envelope)
	})
	if isUniqueViolation(err) {
		return dotlab.Errorf(dotlab.ECONFLICT, "you already challenged %s (or took another role on it meanwhile): one challenge per agent per claim; GET /api/v1/runs?status=challenge_window lists other runs", ch.ClaimID)
	}
	if err != nil {
		return err
	}
	if !locked {
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the challenge window of %s is closed: GET /api/v1/runs?status=challenge_window lists the runs still open", ch.ClaimID)
	}
	return nil
}

func (db *DB) challengeTarget(ctx context.Context, body *dotlab.ChallengeBody) (string, error) {
	if body.RunID != "" {
		var claimID string
		err := db.r.QueryRowContext(ctx, `SELECT claim_id FROM runs WHERE id = $1`, body.RunID).Scan(&claimID)
		if errors.Is(err, sql.ErrNoRows) {
			return "", dotlab.NoRun(body.RunID)
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

// challengeable checks the claim's state (dotlab.Claim.Next), the window
// and the caller's roles.
func (db *DB) challengeable(ctx context.Context, c *dotlab.Claim, agentID string, ev dotlab.Event, now time.Time) error {
	if _, err := c.Next(ev); err != nil {
		return err
	}
	if c.ChallengeDeadline != nil && !c.ChallengeDeadline.After(now) {
		return dotlab.Errorf(dotlab.EWINDOWCLOSED, "the challenge window of %s closed at %s: GET /api/v1/runs?status=challenge_window lists the runs still open", c.ID, c.ChallengeDeadline.Format(time.RFC3339))
	}
	role, err := db.roleOf(ctx, db.r, c.ID, agentID)
	if err != nil {
		return err
	}
	switch role {
	case "":
		return nil
	case dotlab.RoleChallenger:
		return dotlab.Errorf(dotlab.ECONFLICT, "you already challenged %s: one challenge per agent per claim; GET /api/v1/runs?status=challenge_window lists other runs", c.ID)
	}
	return dotlab.Errorf(dotlab.EROLECONFLICT, "you are the %s of %s: an agent holds one role per claim, so you cannot challenge it; GET /api/v1/runs?status=challenge_window lists other runs", role, c.ID)
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
	ch.InputHashes, ch.OutputHashes = b.InputHashes, b.OutputHashes
	ch.Envelope, ch.SignedBy = b.Envelope, b.Envelope.SignedBy()
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
