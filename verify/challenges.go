package verify

import (
	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// checkChallenges recomputes what a dispute page shows of each challenge
// as evidence, from the manifest and the logged values alone
// (docs/verification.md "What verification catches"): the challenger's
// comparisons and outcome from its rerun values (dotlab.Decide), its
// agreement with the official run (dotlab.Agrees), and the per-target
// differences between the two reruns (dotlab.Differences). The
// comparisons and agreement are in the log; the differences are not, so
// a row changed in the database shows only here.
func checkChallenges(rep *Report, rs *records) {
	if rs.run == nil || len(rs.challenges) == 0 {
		return
	}
	m, err := manifest.Parse(rs.manifest)
	if err != nil {
		rep.fail("challenges of %s: cannot recompute: %v", rs.claim.ID, err)
		return
	}
	for _, ch := range rs.challenges {
		recomputeChallenge(rep, m, rs.run, ch)
	}
}

func recomputeChallenge(rep *Report, m *dotlab.Manifest, run *dotlab.Run, ch *dotlab.Challenge) {
	if ch.Outcome.Compared() {
		rerun := make(map[string]dotlab.Decimal, len(ch.Comparisons))
		for _, c := range ch.Comparisons {
			rerun[c.Name] = c.Rerun
		}
		cs, outcome, err := dotlab.Decide(m.Targets, rerun)
		switch {
		case err != nil:
			rep.fail("challenge %s: its rerun values do not compare with the manifest's targets: %v", ch.ID, err)
			return
		case outcome != ch.Outcome:
			rep.fail("challenge %s: outcome %s, but its comparisons give %s", ch.ID, ch.Outcome, outcome)
			return
		case !sameComparisons(cs, ch.Comparisons):
			rep.fail("challenge %s: its comparisons differ from those recomputed from the manifest", ch.ID)
			return
		}
	}
	if want := dotlab.Agrees(run.Outcome, ch.Outcome); ch.Agrees != want {
		rep.fail("challenge %s: shown as agrees=%v, but its outcome %s and the run's %s give agrees=%v", ch.ID, ch.Agrees, ch.Outcome, run.Outcome, want)
		return
	}
	want := dotlab.Differences(run.Comparisons, ch.Comparisons)
	if len(want) != len(ch.Differences) {
		rep.fail("challenge %s: %d differences shown, %d recomputed from the run's and the challenge's comparisons", ch.ID, len(ch.Differences), len(want))
		return
	}
	for i, d := range want {
		if d != ch.Differences[i] {
			got := ch.Differences[i]
			rep.fail("challenge %s: difference on %s shown as runner %s, challenger %s, delta %s (matches %v/%v); recomputed runner %s, challenger %s, delta %s (matches %v/%v)",
				ch.ID, d.Name, got.Runner, got.Challenger, got.Delta, got.RunnerMatch, got.ChallengerMatch, d.Runner, d.Challenger, d.Delta, d.RunnerMatch, d.ChallengerMatch)
			return
		}
	}
	rep.ok("challenge %s: comparisons, agreement and %d differences recomputed", ch.ID, len(want))
}

func sameComparisons(a, b []dotlab.Comparison) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
