package verify_test

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab/sqlstore"
)

// TestChangedChallengeDifferenceFails: the dispute page shows each
// challenge's per-target differences against the run, which the log does
// not hold; an operator rewriting one in the database (the attack: what
// reviewers see differs from what was posted, and verify said nothing)
// makes the claim fail verification, naming the challenge and the target.
func TestChangedChallengeDifferenceFails(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	claimID, _ := e.lifecycle("changed difference")
	rep := e.verify(claimID)
	wantPass(t, rep)
	recomputed := 0
	for _, l := range rep.OK {
		if strings.Contains(l, "differences recomputed") {
			recomputed++
		}
	}
	if recomputed == 0 {
		t.Fatalf("no challenge's differences recomputed: %v", rep.OK)
	}
	raw := rawDB(t, e)
	var id, diffs string
	if err := raw.QueryRow(`SELECT id, differences FROM challenges WHERE claim_id = $1 ORDER BY id LIMIT 1`, claimID).Scan(&id, &diffs); err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(diffs, `"delta":0,`, `"delta":0.5,`, 1)
	if changed == diffs {
		t.Fatalf("no delta to change in %s", diffs)
	}
	if _, err := raw.Exec(`UPDATE challenges SET differences = $1 WHERE id = $2`, changed, id); err != nil {
		t.Fatal(err)
	}
	e.restart()
	wantFailure(t, e.verify(claimID), "challenge "+id, "difference on")
}
