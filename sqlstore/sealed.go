package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// Sealed votes (docs/mechanism.md §4a): the rounds and seats of
// migration 00011. The rules (when a phase ends, who abstains, what
// decides) are the protocol's (store.SealedWrite.Decide); this file keeps
// the rows and the conditions their writes need.

// liveSeats counts the live (not abstained) seats of a claim's current
// round; it is the committee size AddSealedReviewer holds to.
const liveSeats = `(SELECT COUNT(*) FROM sealed_seats s JOIN sealed_rounds r ON r.claim_id = s.claim_id
	WHERE s.claim_id = c.id AND s.round = r.round AND s.abstained = 0)`

// AddSealedReviewer inserts agentID's reviewer role and its seat in
// claimID's current round under the claim's row lock (store.Writer).
func (db *DB) AddSealedReviewer(ctx context.Context, claimID, agentID string, seats int, at, commitDeadline time.Time) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET updated_at = updated_at WHERE id = $1 AND state = 'disputed'`, claimID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return store.ErrCommitteeFull
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sealed_rounds (claim_id, round, phase, commit_deadline) VALUES ($1, 1, $2, $3)
			ON CONFLICT (claim_id) DO NOTHING`, claimID, dotlab.PhaseCommit, ms(commitDeadline)); err != nil {
			return err
		}
		var round, live int
		var phase string
		if err := tx.QueryRowContext(ctx, `SELECT r.round, r.phase, `+liveSeats+` FROM sealed_rounds r JOIN claims c ON c.id = r.claim_id
			WHERE r.claim_id = $1`, claimID).Scan(&round, &phase, &live); err != nil {
			return err
		}
		if phase != dotlab.PhaseCommit || live >= seats {
			return store.ErrCommitteeFull
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, 'reviewer', $3)`, claimID, agentID, ms(at)); err != nil {
			if isUniqueViolation(err) {
				return errSecondRole
			}
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sealed_seats (claim_id, reviewer_id, round, assigned_at) VALUES ($1, $2, $3, $4)`, claimID, agentID, round, ms(at))
		return err
	})
}

// SealedRound reads claimID's current round (store.Reader).
func (db *DB) SealedRound(ctx context.Context, claimID string) (store.SealedRound, bool, error) {
	r, err := readRound(ctx, db.r, claimID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// rowsQuerier is what readRound needs of a pool or a transaction.
type rowsQuerier interface {
	querier
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readRound reads claimID's round, its seats and its settlement inputs;
// sql.ErrNoRows when the claim has no sealed round.
func readRound(ctx context.Context, q rowsQuerier, claimID string) (store.SealedRound, error) {
	r := store.SealedRound{ClaimID: claimID}
	var commit int64
	var reveal sql.NullInt64
	var runID sql.NullString
	var run sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT r.round, r.phase, r.commit_deadline, r.reveal_deadline,
		(SELECT id FROM runs WHERE claim_id = $1), (SELECT outcome FROM runs WHERE claim_id = $1),
		COALESCE((SELECT outcome FROM challenges WHERE claim_id = $1 AND agrees = 0 ORDER BY created_at, id LIMIT 1), '')
		FROM sealed_rounds r WHERE r.claim_id = $1`, claimID).Scan(&r.Round, &r.Phase, &commit, &reveal, &runID, &run, &r.First); err != nil {
		return r, err
	}
	r.CommitDeadline, r.RunID, r.Run = fromMS(commit), runID.String, dotlab.Outcome(run.String)
	if reveal.Valid {
		r.RevealDeadline = fromMS(reveal.Int64)
	}
	seats, err := readSeats(ctx, q, claimID, r.Round)
	r.Seats = seats
	return r, err
}

// readSeats reads the seats of claimID's round, by commit time then
// assignment.
func readSeats(ctx context.Context, q rowsQuerier, claimID string, round int) ([]store.SealedSeat, error) {
	rows, err := q.QueryContext(ctx, `SELECT reviewer_id, assigned_at, commitment, committed_at, vote, rationale, salt, envelope, voted_at, abstained
		FROM sealed_seats WHERE claim_id = $1 AND round = $2 ORDER BY committed_at IS NULL, committed_at, assigned_at, reviewer_id`, claimID, round)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.SealedSeat
	for rows.Next() {
		st, err := scanSeat(rows, claimID, round)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func scanSeat(rows *sql.Rows, claimID string, round int) (store.SealedSeat, error) {
	st := store.SealedSeat{Round: round}
	var assigned int64
	var commitment, vote, rationale, salt, env sql.NullString
	var committed, voted sql.NullInt64
	var abstained int
	if err := rows.Scan(&st.ReviewerID, &assigned, &commitment, &committed, &vote, &rationale, &salt, &env, &voted, &abstained); err != nil {
		return st, err
	}
	st.AssignedAt, st.Commitment, st.Salt, st.Abstained = fromMS(assigned), commitment.String, salt.String, abstained == 1
	if committed.Valid {
		st.CommittedAt = fromMS(committed.Int64)
	}
	if vote.Valid {
		v := &dotlab.Vote{ClaimID: claimID, ReviewerID: st.ReviewerID, Vote: vote.String, Rationale: rationale.String, Salt: salt.String, CreatedAt: fromMS(voted.Int64)}
		if env.Valid {
			if err := json.Unmarshal([]byte(env.String), &v.Envelope); err != nil {
				return st, fmt.Errorf("sealed vote %s/%s envelope: %w", claimID, st.ReviewerID, err)
			}
			v.SignedBy = v.Envelope.SignedBy()
		}
		st.Vote = v
	}
	return st, nil
}

// AssignedSealed is the first disputed claim, by number, whose current
// round holds a live seat of agentID that still has to act (store.Reader).
func (db *DB) AssignedSealed(ctx context.Context, agentID string) (string, bool, error) {
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT c.id FROM sealed_seats s JOIN sealed_rounds r ON r.claim_id = s.claim_id AND r.round = s.round
		JOIN claims c ON c.id = s.claim_id
		WHERE s.reviewer_id = $1 AND s.abstained = 0 AND c.state = 'disputed'
		AND ((r.phase = $2 AND s.commitment IS NULL) OR (r.phase = $3 AND s.commitment IS NOT NULL AND s.vote IS NULL))
		ORDER BY c.number LIMIT 1`, agentID, dotlab.PhaseCommit, dotlab.PhaseReveal).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

// SealedCandidates lists up to limit disputed claims agentID holds no role
// on whose committee has a free seat, by claim number (store.Reader).
func (db *DB) SealedCandidates(ctx context.Context, agentID string, seats, limit int) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT c.id FROM claims c LEFT JOIN sealed_rounds r ON r.claim_id = c.id
		WHERE c.state = 'disputed' AND NOT EXISTS (SELECT 1 FROM roles x WHERE x.claim_id = c.id AND x.agent_id = $1)
		AND (r.claim_id IS NULL OR (r.phase = $2 AND `+liveSeats+` < $3))
		ORDER BY c.number LIMIT $4`, agentID, dotlab.PhaseCommit, seats, limit)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// SealedDue lists up to limit disputed claims whose round's deadline is at
// or before now, the earliest first (store.Reader).
func (db *DB) SealedDue(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT r.claim_id FROM sealed_rounds r JOIN claims c ON c.id = r.claim_id
		WHERE c.state = 'disputed' AND ((r.phase = $1 AND r.commit_deadline <= $3) OR (r.phase = $2 AND r.reveal_deadline <= $3))
		ORDER BY CASE WHEN r.phase = $1 THEN r.commit_deadline ELSE r.reveal_deadline END, r.claim_id LIMIT $4`,
		dotlab.PhaseCommit, dotlab.PhaseReveal, ms(now), limit)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// scanIDs reads one text column of every row and closes rows.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ApplySealed applies a sealed write (store.SealedWrite) in one
// transaction under the claim's row lock (store.Writer).
func (db *DB) ApplySealed(ctx context.Context, w store.SealedWrite) (bool, error) {
	applied := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE claims SET updated_at = $1 WHERE id = $2 AND state = 'disputed'`, ms(w.At), w.ClaimID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		if w.Seat != nil {
			ok, err := changeSeat(ctx, tx, w.ClaimID, w.Seat, w.At)
			if err != nil || !ok {
				return err
			}
		}
		applied = true
		if err := db.appendLog(ctx, tx, w.Log); err != nil {
			return err
		}
		r, err := readRound(ctx, tx, w.ClaimID)
		if err != nil {
			return err
		}
		if d := w.Decide(r); d != nil {
			return db.applyDecision(ctx, tx, w.ClaimID, d, w.At)
		}
		return nil
	})
	if err != nil {
		applied = false
	}
	return applied, err
}

// changeSeat applies ch to its reviewer's live seat in claimID's current
// round if the seat's condition holds (see store.SeatChange).
func changeSeat(ctx context.Context, tx *sql.Tx, claimID string, ch *store.SeatChange, at time.Time) (bool, error) {
	var set string
	var phase string
	var args []any
	switch {
	case ch.Commit != "" && ch.Vote == nil:
		set, phase = `commitment = $4, committed_at = $5 WHERE s.commitment IS NULL`, dotlab.PhaseCommit
		args = []any{ch.Commit, ms(at)}
	default:
		env, err := envelopeText(ch.Envelope)
		if err != nil {
			return false, err
		}
		set = `vote = $4, rationale = $5, salt = $6, envelope = $7, voted_at = $8`
		args = []any{ch.Vote.Vote, ch.Vote.Rationale, ch.Salt, env, ms(at)}
		if ch.Commit != "" {
			set, phase = set+`, commitment = $9, committed_at = $8 WHERE s.commitment IS NULL`, dotlab.PhaseCommit
			args = append(args, ch.Commit)
		} else {
			set, phase = set+` WHERE s.commitment IS NOT NULL AND s.vote IS NULL`, dotlab.PhaseReveal
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE sealed_seats AS s SET `+set+` AND s.claim_id = $1 AND s.reviewer_id = $2 AND s.abstained = 0
		AND s.round = (SELECT r.round FROM sealed_rounds r WHERE r.claim_id = $1 AND r.phase = $3)`,
		append([]any{claimID, ch.ReviewerID, phase}, args...)...)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// applyDecision writes decision d on claimID's round at time at: the
// round's next state, the abstentions, the votes made public with their
// log entries, and the settlement.
func (db *DB) applyDecision(ctx context.Context, tx *sql.Tx, claimID string, d *store.SealedDecision, at time.Time) error {
	var reveal sql.NullInt64
	if !d.RevealDeadline.IsZero() {
		reveal = sql.NullInt64{Int64: ms(d.RevealDeadline), Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sealed_rounds SET round = $2, phase = $3, commit_deadline = $4, reveal_deadline = $5 WHERE claim_id = $1`,
		claimID, d.Round, d.Phase, ms(d.CommitDeadline), reveal); err != nil {
		return err
	}
	for _, id := range d.Abstain {
		if _, err := tx.ExecContext(ctx, `UPDATE sealed_seats SET abstained = 1 WHERE claim_id = $1 AND reviewer_id = $2`, claimID, id); err != nil {
			return err
		}
	}
	for _, st := range d.Publish {
		v := st.Vote
		env, err := envelopeText(v.Envelope)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO votes (claim_id, reviewer_id, vote, rationale, created_at, envelope, salt) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			claimID, v.ReviewerID, v.Vote, v.Rationale, ms(v.CreatedAt), env, v.Salt); err != nil {
			return err
		}
	}
	if err := db.appendLog(ctx, tx, d.Log); err != nil {
		return err
	}
	db.announceClaim(tx, claimID)
	if d.Settlement == nil {
		return nil
	}
	return db.settle(ctx, tx, claimID, d.Settlement, at)
}

// CheckVoteMode refuses to run the store's vote mode (Windows.Sealed) on
// a database holding disputes still open in the other mode
// (docs/mechanism.md §4a: the mode is switched only with no dispute open):
// sealed, a disputed claim with open votes; open, one with a sealed round.
// The error names up to 10 of them.
func (db *DB) CheckVoteMode(ctx context.Context) error {
	query, mode, other := `SELECT DISTINCT c.id, c.number FROM claims c JOIN votes v ON v.claim_id = c.id
		WHERE c.state = 'disputed' AND NOT EXISTS (SELECT 1 FROM sealed_rounds r WHERE r.claim_id = c.id) ORDER BY c.number LIMIT 10`, "--sealed-votes", "open votes"
	if !db.windows.Sealed {
		query, mode, other = `SELECT c.id, c.number FROM claims c JOIN sealed_rounds r ON r.claim_id = c.id
			WHERE c.state = 'disputed' ORDER BY c.number LIMIT 10`, "open votes (no --sealed-votes)", "sealed votes"
	}
	rows, err := db.r.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ids) > 0 {
		return fmt.Errorf("cannot start with %s: disputes %s are open with %s; restart in their mode until they are decided (docs/mechanism.md §4a)", mode, strings.Join(ids, ", "), other)
	}
	return nil
}
