package main

import (
	"github.com/shopspring/decimal"

	"ogendriver/api"
)

// challenge posts a disagreeing rerun by the challenger and checks the
// server's delta exactly (a double would read 4.432999…e-07).
func (d *driver) challenge(claim api.ClaimDetail) {
	in, env, cs := runBody(claim, map[string]string{"mean_diff": "1.58", "t_paired": "4.0621239"})
	body := &api.ChallengeBody{ClaimID: api.NewOptString(claim.ID), Agrees: false, InputHashes: in,
		OutputHashes: api.NewOptNilHashMap(api.HashMap{}), Environment: env, Comparisons: cs, Outcome: api.ChallengeBodyOutcomeNotReproduced,
		Notes: api.NewOptString("t_paired: my rerun 4.0621239 vs the run's 4.0621234567, difference 0.0000004433, beyond the relative tolerance 1e-9")}
	ch := as[*api.Challenge](d.agents["challenger"].c.CreateChallenge(d.ctx, body))
	df := ch.Differences[1]
	if df.Name != "t_paired" || df.Delta.Null || !exact(df.Delta.Value, "0.0000004433") || !exact(df.Challenger, "4.0621239") {
		fail("t_paired difference: %+v (delta %v)", df, decimal.Decimal(df.Delta.Value))
	}
}

// votes: three reviewers draw the dispute and vote; the third settles it.
func (d *driver) votes(claim string) {
	sides := []api.VoteBodyVote{api.VoteBodyVoteRunner, api.VoteBodyVoteRunner, api.VoteBodyVoteChallenger}
	for i, side := range sides {
		rev := d.agents[[]string{"reviewer1", "reviewer2", "reviewer3"}[i]].c
		if dp := as[*api.Dispute](rev.NextDispute(d.ctx)); dp.DisputeID != claim || len(dp.Votes) != i {
			fail("reviewer %d drew %+v", i+1, dp)
		}
		dp := as[*api.Dispute](rev.CastVote(d.ctx, &api.VoteBody{Vote: side,
			Rationale: "t_paired: the runner's 4.0621234567 equals the published value; the challenger's 4.0621239 does not"},
			api.CastVoteParams{ID: claim}))
		if settled := dp.Claim.State == api.ClaimStateSettled; settled != (i == 2) {
			fail("after vote %d the claim is %s", i+1, dp.Claim.State)
		}
	}
	c := as[*api.ClaimDetail](d.anon.GetClaim(d.ctx, api.GetClaimParams{ID: claim}))
	if c.State != api.ClaimStateSettled || c.Outcome.Value != api.OutcomeReproduced {
		fail("settled claim: %+v", c)
	}
}

// extreme lists a claim whose target is the largest double and publishes
// the most negative double as its rerun: the difference, 2 × 1.797…e308,
// is beyond a double's range, and ogen's decimal reads it exactly.
func (d *driver) extreme(manifest string) {
	claim := d.list(manifest)
	d.take(claim.ID)
	run := d.publish(claim, map[string]string{"mean_diff": "1.58", "huge": "-1.7976931348623157e308"}, api.RunBodyOutcomeNotReproduced)
	for _, c := range run.Comparisons {
		if c.Name == "huge" && (!exact(c.Difference, "3.5953862697246314e308") || c.Match) {
			fail("huge difference %v", decimal.Decimal(c.Difference))
		}
	}
	got := as[*api.Run](d.anon.GetRun(d.ctx, api.GetRunParams{ID: run.ID}))
	if len(got.Comparisons) != 2 || !exact(got.Comparisons[1].Difference, "3.5953862697246314e308") {
		fail("the extreme run read back: %+v", got.Comparisons)
	}
}
