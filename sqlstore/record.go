package sqlstore

import (
	"context"

	"github.com/dotlab/dotlab"
)

// agentRecord counts what an agent has done, straight from the record, for
// its profile and dotlab.Standing.
func (db *DB) agentRecord(ctx context.Context, agentID string) (dotlab.AgentRecord, error) {
	rec := dotlab.AgentRecord{Outcomes: map[dotlab.Outcome]int{}, Declines: map[string]int{}}
	rows, err := db.r.QueryContext(ctx, `SELECT r.outcome, c.state, COALESCE(c.outcome, '') FROM runs r JOIN claims c ON c.id = r.claim_id
		WHERE r.runner_id = $1`, agentID)
	if err != nil {
		return rec, err
	}
	for rows.Next() {
		var runOutcome, state, final string
		if err := rows.Scan(&runOutcome, &state, &final); err != nil {
			rows.Close()
			return rec, err
		}
		rec.RunsPublished++
		rec.Outcomes[dotlab.Outcome(runOutcome)]++
		// spec_issue and input_mismatch settle at once and cannot be
		// challenged, so they earn no standing either way.
		if state == string(dotlab.StateSettled) && dotlab.Outcome(runOutcome).Compared() {
			if final == runOutcome {
				rec.RunsUpheld++
			} else {
				rec.RunsOverturned++
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rec, err
	}
	rows, err = db.r.QueryContext(ctx, `SELECT state, reason FROM jobs WHERE agent_id = $1 AND state IN ('abandoned', 'declined')`, agentID)
	if err != nil {
		return rec, err
	}
	for rows.Next() {
		var state, reason string
		if err := rows.Scan(&state, &reason); err != nil {
			rows.Close()
			return rec, err
		}
		if state == string(dotlab.JobAbandoned) {
			rec.Abandoned++
			continue
		}
		rec.Declines[reason]++
		if reason != dotlab.DeclineCapabilityMismatch {
			rec.ReasonlessDeclines++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rec, err
	}
	// Challenges: judged against the final outcome once the claim settled.
	rows, err = db.r.QueryContext(ctx, `SELECT ch.agrees, ch.outcome, c.state, COALESCE(c.outcome, '') FROM challenges ch
		JOIN claims c ON c.id = ch.claim_id WHERE ch.challenger_id = $1`, agentID)
	if err != nil {
		return rec, err
	}
	for rows.Next() {
		var agrees int64
		var outcome, state, final string
		if err := rows.Scan(&agrees, &outcome, &state, &final); err != nil {
			rows.Close()
			return rec, err
		}
		rec.Challenges++
		if state != string(dotlab.StateSettled) {
			continue
		}
		switch {
		case agrees == 1 && final == outcome:
			rec.ChallengesConfirm++
		case agrees == 0 && final == outcome:
			rec.ChallengesUseful++
		case agrees == 0:
			rec.ChallengesBaseless++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rec, err
	}
	// Votes: with or against the side that decided the settled dispute.
	rows, err = db.r.QueryContext(ctx, `SELECT v.vote, c.state, COALESCE(c.outcome, ''), r.outcome FROM votes v
		JOIN claims c ON c.id = v.claim_id JOIN runs r ON r.claim_id = v.claim_id WHERE v.reviewer_id = $1`, agentID)
	if err != nil {
		return rec, err
	}
	defer rows.Close()
	for rows.Next() {
		var vote, state, final, runOutcome string
		if err := rows.Scan(&vote, &state, &final, &runOutcome); err != nil {
			return rec, err
		}
		rec.Votes++
		if state != string(dotlab.StateSettled) {
			continue
		}
		runnerWon := final == runOutcome
		if (vote == "runner") == runnerWon {
			rec.VotesWithMajority++
		} else {
			rec.VotesAgainst++
		}
	}
	return rec, rows.Err()
}
