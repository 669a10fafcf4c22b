package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// The claim state machine is the domain's (dotlab.Transitions,
// docs/protocol.md §3). The store asks it which move an event makes and runs
// the conditional UPDATE that makes the move hold under concurrency:
// UPDATE claims SET state = t.To … WHERE state = t.From (or IN the event's
// sources), so that of two racing requests exactly one applies it and the
// other sees zero rows updated.

// transition returns the move ev makes from the stored state from. The
// store calls it with a from the domain allows, so a refusal here is a bug
// and is reported as an internal error, not as the domain's code.
func transition(from dotlab.ClaimState, ev dotlab.Event) (dotlab.Transition, error) {
	t, err := dotlab.Next(from, ev)
	if err != nil {
		return t, fmt.Errorf("lifecycle: %s from %q: %v", ev, from, err)
	}
	return t, nil
}

// sources renders the states ev may start from (dotlab.Sources) as an SQL
// list for "state IN (…)": 'assigned', 'running'. The states are the
// domain's constants (lowercase letters and '_', see dotlab.ClaimStates),
// never input.
func sources(ev dotlab.Event) string {
	var b strings.Builder
	for i, s := range dotlab.Sources(ev) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + string(s) + "'")
	}
	return b.String()
}

// addHistory records the states t records in the claim's history
// (t.History(): e.g. published, then challenge_window), one detail each,
// and announces the claim (db.announce): every state change is announced.
func (db *DB) addHistory(ctx context.Context, tx *sql.Tx, claimID string, t dotlab.Transition, at time.Time, details ...string) error {
	states := t.History()
	if len(states) != len(details) {
		return fmt.Errorf("lifecycle: %s from %q records %d states, given %d details", t.Event, t.From, len(states), len(details))
	}
	db.announceClaim(tx, claimID)
	for i, s := range states {
		if err := addEvent(ctx, tx, claimID, s, at, details[i]); err != nil {
			return err
		}
	}
	return nil
}
