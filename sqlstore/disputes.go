package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// AssignedDispute is the disputed claim agentID is assigned to review and
// has not voted on yet, the first by claim number; found is false for
// none (store.Reader).
func (db *DB) AssignedDispute(ctx context.Context, agentID string) (string, bool, error) {
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT r.claim_id FROM roles r JOIN claims c ON c.id = r.claim_id
		WHERE r.agent_id = $1 AND r.role = 'reviewer' AND c.state = 'disputed'
		AND NOT EXISTS (SELECT 1 FROM votes v WHERE v.claim_id = r.claim_id AND v.reviewer_id = $1)
		ORDER BY c.number LIMIT 1`, agentID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

// DisputeCandidates lists up to limit disputed claims agentID holds no
// role on, by claim number (store.Reader).
func (db *DB) DisputeCandidates(ctx context.Context, agentID string, limit int) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT c.id FROM claims c WHERE c.state = 'disputed'
		AND NOT EXISTS (SELECT 1 FROM roles r WHERE r.claim_id = c.id AND r.agent_id = $1)
		ORDER BY c.number LIMIT $2`, agentID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// AddReviewer gives agentID the reviewer role on claimID; a role it took
// meanwhile is ECONFLICT.
func (db *DB) AddReviewer(ctx context.Context, claimID, agentID string, at time.Time) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'reviewer', $3)`, claimID, agentID, ms(at))
	if isUniqueViolation(err) {
		return errSecondRole
	}
	return err
}

// FindDispute returns the evidence of a claim that has (or had) a dispute.
func (db *DB) FindDispute(ctx context.Context, claimID string) (*dotlab.Dispute, error) {
	c, err := db.FindClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	if c.RunID == "" {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "%s has no run, so no dispute: %s draws a dispute for you to review", claimID, dotlab.Go(dotlab.StepDrawDispute, ""))
	}
	run, err := db.FindRun(ctx, c.RunID)
	if err != nil {
		return nil, err
	}
	chs, err := db.FindChallenges(ctx, claimID)
	if err != nil {
		return nil, err
	}
	if dotlab.FirstDisagreeing(chs) == nil {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "%s has no disagreeing challenge, so no dispute: %s draws a dispute for you to review", claimID, dotlab.Go(dotlab.StepDrawDispute, ""))
	}
	votes, err := db.votes(ctx, claimID)
	if err != nil {
		return nil, err
	}
	d := &dotlab.Dispute{ID: claimID, Claim: c, Run: run, Challenges: chs, Votes: votes, Quorum: db.windows.Quorum}
	if c.State == dotlab.StateDisputed {
		d.Sealed, err = db.seal(ctx, claimID)
	}
	return d, err
}

// seal is the public view of claimID's current sealed round (nil for
// none): phase, deadlines and each seat's commitment, never a vote.
func (db *DB) seal(ctx context.Context, claimID string) (*dotlab.Seal, error) {
	r, found, err := db.SealedRound(ctx, claimID)
	if err != nil || !found {
		return nil, err
	}
	out := &dotlab.Seal{Round: r.Round, Phase: r.Phase, CommitDeadline: r.CommitDeadline, Votes: []dotlab.SealedVote{}}
	if !r.RevealDeadline.IsZero() {
		at := r.RevealDeadline
		out.RevealDeadline = &at
	}
	for _, st := range r.Seats {
		v := dotlab.SealedVote{ReviewerID: st.ReviewerID, Commitment: st.Commitment, Revealed: st.Vote != nil, Abstained: st.Abstained}
		if !st.CommittedAt.IsZero() {
			at := st.CommittedAt
			v.CommittedAt = &at
		}
		out.Votes = append(out.Votes, v)
	}
	return out, nil
}

func (db *DB) votes(ctx context.Context, claimID string) ([]dotlab.Vote, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT reviewer_id, vote, rationale, created_at, envelope, COALESCE(salt, '') FROM votes WHERE claim_id = $1 ORDER BY created_at, reviewer_id`, claimID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dotlab.Vote{}
	for rows.Next() {
		v := dotlab.Vote{ClaimID: claimID}
		var at int64
		var env sql.NullString
		if err := rows.Scan(&v.ReviewerID, &v.Vote, &v.Rationale, &at, &env, &v.Salt); err != nil {
			return nil, err
		}
		v.CreatedAt = fromMS(at)
		if env.Valid {
			if err := json.Unmarshal([]byte(env.String), &v.Envelope); err != nil {
				return nil, fmt.Errorf("vote %s/%s envelope: %w", claimID, v.ReviewerID, err)
			}
			v.SignedBy = v.Envelope.SignedBy()
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// AddVote applies a reviewer's vote (store.VoteWrite) under the claim's
// row lock while it is disputed, then counts the votes (tally). applied is
// false when the claim left disputed meanwhile; a second vote is ECONFLICT.
func (db *DB) AddVote(ctx context.Context, w store.VoteWrite) (bool, error) {
	v := w.Vote
	locked := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		// Lock the claim row so that concurrent votes count one at a time.
		res, err := tx.ExecContext(ctx, `UPDATE claims SET updated_at = $1 WHERE id = $2 AND state IN (`+sources(dotlab.EventVote)+`)`, ms(w.At), v.ClaimID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		locked = true
		db.announceClaim(tx, v.ClaimID)
		env, err := envelopeText(w.Envelope)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO votes (claim_id, reviewer_id, vote, rationale, created_at, envelope) VALUES ($1, $2, $3, $4, $5, $6)`,
			v.ClaimID, v.ReviewerID, v.Vote, v.Rationale, ms(w.At), env); err != nil {
			return err
		}
		if err := useStatement(ctx, tx, v.ClaimID, w.Statement, w.At); err != nil {
			return err
		}
		if err := db.appendLog(ctx, tx, w.Log); err != nil {
			return err
		}
		return db.tally(ctx, tx, v.ClaimID, w)
	})
	if isUniqueViolation(err) {
		return false, errSecondVote
	}
	return locked, err
}

// errSecondVote is a unique violation of the votes table.
var errSecondVote = dotlab.Errorf(dotlab.ECONFLICT, "you already voted on this dispute: one vote per reviewer")

// HasVoted reports whether reviewerID voted on claimID (store.Reader).
func (db *DB) HasVoted(ctx context.Context, claimID, reviewerID string) (bool, error) {
	var one int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM votes WHERE claim_id = $1 AND reviewer_id = $2`, claimID, reviewerID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// tally counts the votes on claimID in tx and applies the settlement
// w.Tally decides on, if any (the quorum's majority).
func (db *DB) tally(ctx context.Context, tx *sql.Tx, claimID string, w store.VoteWrite) error {
	var t dotlab.Tally
	var runID string
	var run, first dotlab.Outcome
	if err := tx.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN v.vote = $2 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN v.vote = $3 THEN 1 ELSE 0 END), 0),
		(SELECT id FROM runs WHERE claim_id = $1), (SELECT outcome FROM runs WHERE claim_id = $1),
		COALESCE((SELECT outcome FROM challenges WHERE claim_id = $1 AND agrees = 0 ORDER BY created_at, id LIMIT 1), '')
		FROM votes v WHERE v.claim_id = $1`, claimID, dotlab.VoteRunner, dotlab.VoteChallenger).Scan(&t.Runner, &t.Challenger, &runID, &run, &first); err != nil {
		return err
	}
	st := w.Tally(t, runID, run, first)
	if st == nil {
		return nil
	}
	return db.settle(ctx, tx, claimID, st, w.At)
}

// settle applies settlement st to disputed claimID at time at: the state
// and outcome, the history, the log entries.
func (db *DB) settle(ctx context.Context, tx *sql.Tx, claimID string, st *store.Settlement, at time.Time) error {
	tr := st.Transition
	if _, err := tx.ExecContext(ctx, `UPDATE claims SET state = $4, outcome = $1, settled_at = $2, updated_at = $2
		WHERE id = $3 AND state = $5`, st.Outcome, ms(at), claimID, tr.To, tr.From); err != nil {
		return err
	}
	if err := db.addHistory(ctx, tx, claimID, tr, at, st.History...); err != nil {
		return err
	}
	return db.appendLog(ctx, tx, st.Log)
}
