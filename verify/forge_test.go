package verify_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

// The operator's forgeries: records written straight through the store's
// conditional writes (store.Writer), past every check of the protocol
// service, and logged as the protocol would log them. A verifier must
// catch them anyway.

// forgeRun files body (raw, as signed for another claim) as runnerID's run
// of body.JobID.
func forgeRun(t *testing.T, db *sqlstore.DB, runnerID string, body *dotlab.RunBody, raw []byte) *dotlab.Run {
	t.Helper()
	ctx := context.Background()
	c := must(db.FindClaim(ctx, body.JobID))
	tr := must(c.Next(dotlab.PublishEvent(body.Outcome)))
	comps := must(dotlab.EvaluateRun(c.Manifest, body))
	at := db.Now()
	run := &dotlab.Run{ID: dotlab.NewID("run_"), ClaimID: c.ID, RunnerID: runnerID, Outcome: body.Outcome, Body: *body, Comparisons: comps, PublishedAt: at}
	w := store.RunWrite{Write: store.Write{At: at, Log: []tlogfmt.Entry{tlogfmt.RunEntry(run), tlogfmt.EnvelopeEntry(tlogfmt.TypeRun, c.ID, run.ID, body.Envelope)}},
		ClaimID: c.ID, RunnerID: runnerID, RunID: run.ID, Transition: tr, Outcome: body.Outcome, Body: raw, Comparisons: must(json.Marshal(comps)),
		ChallengeDeadline: at.Add(db.Windows().Challenge), History: []string{"run " + run.ID + " published", "challenge window open"}}
	if !must(db.AddRun(ctx, w)) {
		t.Fatal("the forged run was not applied")
	}
	return must(db.FindRun(ctx, run.ID))
}

// forgeChallenge files body (raw, as signed for another claim) as
// challengerID's agreeing challenge of body.ClaimID's run.
func forgeChallenge(t *testing.T, db *sqlstore.DB, challengerID string, body *dotlab.ChallengeBody, raw []byte) *dotlab.Challenge {
	t.Helper()
	ctx := context.Background()
	c := must(db.FindClaim(ctx, body.ClaimID))
	comps := must(dotlab.EvaluateRun(c.Manifest, &body.RunBody))
	ch := &dotlab.Challenge{ID: dotlab.NewID("ch_"), ClaimID: c.ID, RunID: c.RunID, ChallengerID: challengerID, Agrees: true, Outcome: body.Outcome,
		Comparisons: comps, InputHashes: body.InputHashes, OutputHashes: body.OutputHashes, Notes: body.Notes, CreatedAt: db.Now()}
	w := store.ChallengeWrite{Write: store.Write{At: ch.CreatedAt, Log: []tlogfmt.Entry{tlogfmt.ChallengeEntry(ch),
		tlogfmt.EnvelopeEntry(tlogfmt.TypeChallenge, c.ID, ch.ID, body.Envelope)}},
		Challenge: ch, Transition: must(dotlab.Next(dotlab.StateChallengeWindow, dotlab.EventChallengeAgree)), Body: raw,
		Comparisons: must(json.Marshal(comps)), Differences: []byte("[]")}
	if !must(db.AddChallenge(ctx, w)) {
		t.Fatal("the forged challenge was not applied")
	}
	return ch
}
