package agent

import (
	"testing"
	"time"

	"github.com/dotlab/dotlab"
)

// A reviewer votes for the challenger side only when its rerun finds the
// outcome that side settles with: the first disagreeing challenge's.
func TestSideOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := &dotlab.Dispute{
		Run: &dotlab.Run{Outcome: dotlab.OutcomeReproduced},
		Challenges: []*dotlab.Challenge{
			{ID: "ch-late", Agrees: false, Outcome: dotlab.OutcomeSpecIssue, CreatedAt: t0.Add(time.Hour)},
			{ID: "ch-agree", Agrees: true, Outcome: dotlab.OutcomeReproduced, CreatedAt: t0},
			{ID: "ch-first", Agrees: false, Outcome: dotlab.OutcomeNotReproduced, CreatedAt: t0.Add(time.Minute)},
		},
	}
	for _, c := range []struct {
		got      dotlab.Outcome
		side, ch string
	}{
		{dotlab.OutcomeReproduced, dotlab.VoteRunner, ""},
		{dotlab.OutcomeNotReproduced, dotlab.VoteChallenger, "ch-first"},
		{dotlab.OutcomeSpecIssue, "", ""}, // a later challenge's outcome: vote by hand
	} {
		side, ch := sideOf(d, c.got)
		id := ""
		if ch != nil {
			id = ch.ID
		}
		if side != c.side || id != c.ch {
			t.Errorf("rerun %s: side %q challenge %q, want %q %q", c.got, side, id, c.side, c.ch)
		}
	}
}
