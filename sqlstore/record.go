package sqlstore

import (
	"context"

	"github.com/dotlab/dotlab"
)

// agentRecord counts what an agent has done, straight from the record, for
// its profile and dotlab.Standing. The rules of what counts are the
// domain's (dotlab.AgentRecord's Add methods, docs/mechanism.md §6); the
// store only reads the rows.
func (db *DB) agentRecord(ctx context.Context, agentID string) (dotlab.AgentRecord, error) {
	rec := dotlab.AgentRecord{Outcomes: map[dotlab.Outcome]int{}, Declines: map[string]int{}}
	settled := string(dotlab.StateSettled)
	reads := []struct {
		query string
		add   func(rowScanner) error
	}{
		{`SELECT r.outcome, c.state, COALESCE(c.outcome, ''), r.logs_complete FROM runs r JOIN claims c ON c.id = r.claim_id
			WHERE r.runner_id = $1`, func(row rowScanner) error {
			var run, state, final string
			var complete int64
			if err := row.Scan(&run, &state, &final, &complete); err != nil {
				return err
			}
			rec.AddRun(dotlab.Outcome(run), state == settled, dotlab.Outcome(final), complete == 1)
			return nil
		}},
		{`SELECT state, reason FROM jobs WHERE agent_id = $1 AND state IN ('abandoned', 'declined')`, func(row rowScanner) error {
			var state, reason string
			if err := row.Scan(&state, &reason); err != nil {
				return err
			}
			rec.AddJobEnd(dotlab.JobState(state), reason)
			return nil
		}},
		{`SELECT ch.agrees, ch.outcome, c.state, COALESCE(c.outcome, '') FROM challenges ch
			JOIN claims c ON c.id = ch.claim_id WHERE ch.challenger_id = $1`, func(row rowScanner) error {
			var agrees int64
			var outcome, state, final string
			if err := row.Scan(&agrees, &outcome, &state, &final); err != nil {
				return err
			}
			rec.AddChallenge(agrees == 1, dotlab.Outcome(outcome), state == settled, dotlab.Outcome(final))
			return nil
		}},
		{`SELECT v.vote, c.state, COALESCE(c.outcome, ''), r.outcome FROM votes v
			JOIN claims c ON c.id = v.claim_id JOIN runs r ON r.claim_id = v.claim_id WHERE v.reviewer_id = $1`, func(row rowScanner) error {
			var vote, state, final, run string
			if err := row.Scan(&vote, &state, &final, &run); err != nil {
				return err
			}
			rec.AddVote(vote, state == settled, dotlab.Outcome(final), dotlab.Outcome(run))
			return nil
		}},
		{`SELECT COUNT(*) FROM sealed_seats WHERE reviewer_id = $1 AND abstained = 1`, func(row rowScanner) error {
			return row.Scan(&rec.Abstained)
		}},
	}
	for _, r := range reads {
		if err := db.eachRow(ctx, r.query, agentID, r.add); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// eachRow runs query with agentID and calls fn for every row.
func (db *DB) eachRow(ctx context.Context, query, agentID string, fn func(rowScanner) error) error {
	rows, err := db.r.QueryContext(ctx, query, agentID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
