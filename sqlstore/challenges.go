package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// AddChallenge applies a challenge (store.ChallengeWrite) under the
// claim's row lock while its window is open: the challenger's role, the
// challenge row and, for the first disagreeing challenge, the move to
// disputed, then w.Log. applied is false when the window closed meanwhile;
// a second role of the challenger on the claim is ECONFLICT.
func (db *DB) AddChallenge(ctx context.Context, w store.ChallengeWrite) (bool, error) {
	ch, t := w.Challenge, w.Transition
	locked := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		// Lock the claim row (PostgreSQL) while the window is open, so the
		// move to disputed and the settlement cannot interleave.
		res, err := tx.ExecContext(ctx, `UPDATE claims SET updated_at = $1 WHERE id = $2
			AND state IN (`+sources(t.Event)+`) AND challenge_deadline > $1`, ms(w.At), ch.ClaimID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		locked = true
		db.announceClaim(tx, ch.ClaimID) // the run's record names the first disagreeing challenge
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'challenger', $3)`,
			ch.ClaimID, ch.ChallengerID, ms(w.At)); err != nil {
			return err
		}
		agrees := int64(0)
		if ch.Agrees {
			agrees = 1
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO challenges (id, claim_id, run_id, challenger_id, agrees, outcome, body, comparisons, differences, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, ch.ID, ch.ClaimID, ch.RunID, ch.ChallengerID, agrees, ch.Outcome, string(w.Body),
			string(w.Comparisons), string(w.Differences), ms(w.At)); err != nil {
			return err
		}
		if err := pinOutputListing(ctx, tx, ch.ClaimID, ch.ChallengerID, w.OutputListing, ch.ID); err != nil {
			return err
		}
		if t.Moves() {
			res, err = tx.ExecContext(ctx, `UPDATE claims SET state = $3, updated_at = $1 WHERE id = $2 AND state = $4`, ms(w.At), ch.ClaimID, t.To, t.From)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				if err := db.addHistory(ctx, tx, ch.ClaimID, t, w.At, w.History...); err != nil {
					return err
				}
			}
		}
		if err := useStatement(ctx, tx, ch.ClaimID, w.Statement, w.At); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Log)
	})
	if isUniqueViolation(err) {
		return false, errSecondRole
	}
	return locked, err
}

// errSecondRole is a unique violation of the roles table: the agent took
// another role on the claim meanwhile (the protocol explains it).
var errSecondRole = dotlab.Errorf(dotlab.ECONFLICT, "you already hold a role on this claim (one role per agent per claim)")

// RunClaim is the claim of run runID (store.Reader).
func (db *DB) RunClaim(ctx context.Context, runID string) (string, error) {
	var claimID string
	err := db.r.QueryRowContext(ctx, `SELECT claim_id FROM runs WHERE id = $1`, runID).Scan(&claimID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", dotlab.NoRun(runID)
	}
	return claimID, err
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
	ch.InputHashes, ch.OutputHashes, ch.OutputListing = b.InputHashes, b.OutputHashes, b.OutputListing
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
