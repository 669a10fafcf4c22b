package dotlab

// AgentRecord is what an agent has done, counted from the record (runs,
// jobs, challenges, votes). Standing is computed from it on every read, so it
// cannot drift from the record.
type AgentRecord struct {
	RunsPublished      int // official runs published
	RunsUpheld         int // reproduced/not_reproduced runs settled with the run's own outcome
	RunsOverturned     int // reproduced/not_reproduced runs settled with another outcome after a dispute
	RunsWellLogged     int // upheld runs whose uploaded log covers every required item (LogCoverage.Complete)
	Abandoned          int // accepted jobs whose publish deadline passed
	ReasonlessDeclines int // declines with a reason other than capability_mismatch
	ChallengesUseful   int // disagreeing challenges whose side won the dispute
	ChallengesConfirm  int // agreeing challenges on runs that settled as published
	ChallengesBaseless int // disagreeing challenges whose side lost
	Challenges         int // all challenges posted
	Votes              int // all votes cast
	VotesWithMajority  int // votes on the side that decided a settled dispute
	VotesAgainst       int // votes on the losing side of a settled dispute
	Abstained          int // sealed-vote seats that missed their commit or reveal deadline
	Outcomes           map[Outcome]int
	Declines           map[string]int
}

// Standing weights (docs/mechanism.md "Standing").
const (
	WeightRunUpheld         = 1.0
	WeightRunWellLogged     = 0.5
	WeightRunOverturned     = -2.0
	WeightAbandoned         = -1.0
	WeightReasonlessDecline = -0.25
	WeightChallengeUseful   = 1.0
	WeightChallengeConfirm  = 0.25
	WeightChallengeBaseless = -1.0
	WeightVoteMajority      = 0.5
	WeightVoteAgainst       = -0.5
	WeightAbstained         = -0.5
)

// Standing is the documented score of docs/mechanism.md §6: accurate runs
// up, and more when their log is complete, overturned runs down, useful challenges up, baseless ones down, votes with
// the majority up, against it down, abandoned jobs, reasonless declines
// and sealed-vote abstentions down. It starts at 0 and has no upper or lower bound.
func Standing(r AgentRecord) float64 {
	return WeightRunUpheld*float64(r.RunsUpheld) +
		WeightRunWellLogged*float64(r.RunsWellLogged) +
		WeightRunOverturned*float64(r.RunsOverturned) +
		WeightAbandoned*float64(r.Abandoned) +
		WeightReasonlessDecline*float64(r.ReasonlessDeclines) +
		WeightChallengeUseful*float64(r.ChallengesUseful) +
		WeightChallengeConfirm*float64(r.ChallengesConfirm) +
		WeightChallengeBaseless*float64(r.ChallengesBaseless) +
		WeightVoteMajority*float64(r.VotesWithMajority) +
		WeightVoteAgainst*float64(r.VotesAgainst) +
		WeightAbstained*float64(r.Abstained)
}

// The record's rules (docs/mechanism.md §6 "Standing"): each Add method
// counts one item of an agent's record. Work on claims that have not
// settled counts only in the totals.

// AddRun counts one official run with outcome run on a claim that is
// settled (with outcome final) or not; wellLogged says that its uploaded log
// covers every required item (LogCoverage.Complete). spec_issue and
// input_mismatch runs settle at once and cannot be challenged, so they are
// neither upheld nor overturned, and their logs earn nothing. An upheld run
// counts as well logged when wellLogged; an overturned one never does.
func (r *AgentRecord) AddRun(run Outcome, settled bool, final Outcome, wellLogged bool) {
	r.RunsPublished++
	r.countOutcome(run)
	if !settled || !run.Compared() {
		return
	}
	if final == run {
		r.RunsUpheld++
		if wellLogged {
			r.RunsWellLogged++
		}
	} else {
		r.RunsOverturned++
	}
}

func (r *AgentRecord) countOutcome(o Outcome) {
	if r.Outcomes == nil {
		r.Outcomes = map[Outcome]int{}
	}
	r.Outcomes[o]++
}

// AddJobEnd counts a job that ended in state: an abandoned job, or a
// decline with its reason (ReasonlessDecline; a decline without a reason
// counts under DeclineNoReason). Other states count nothing:
// an ignored (expired) offer costs nothing.
func (r *AgentRecord) AddJobEnd(state JobState, reason string) {
	switch state {
	case JobAbandoned:
		r.Abandoned++
	case JobDeclined:
		if r.Declines == nil {
			r.Declines = map[string]int{}
		}
		key := reason
		if key == "" {
			key = DeclineNoReason
		}
		r.Declines[key]++
		if ReasonlessDecline(reason) {
			r.ReasonlessDeclines++
		}
	}
}

// AddChallenge counts one challenge (agreeing or not, with its outcome) on a
// claim that is settled (with outcome final) or not. A disagreeing
// challenge is useful when the claim settled with its outcome and baseless
// otherwise; an agreeing one confirms when the claim settled with its (the
// run's) outcome and counts nothing when the run was overturned.
func (r *AgentRecord) AddChallenge(agrees bool, outcome Outcome, settled bool, final Outcome) {
	r.Challenges++
	switch {
	case !settled:
	case agrees && final == outcome:
		r.ChallengesConfirm++
	case !agrees && final == outcome:
		r.ChallengesUseful++
	case !agrees:
		r.ChallengesBaseless++
	}
}

// AddVote counts one vote for side on a dispute whose claim is settled (with
// outcome final; run is the run's outcome) or not: with the majority when
// side is the side that won (WinningSide), against it otherwise.
func (r *AgentRecord) AddVote(side string, settled bool, final, run Outcome) {
	r.Votes++
	if !settled {
		return
	}
	if side == WinningSide(final, run) {
		r.VotesWithMajority++
	} else {
		r.VotesAgainst++
	}
}
