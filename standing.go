package dotlab

// AgentRecord is what an agent has done, counted from the record (runs,
// jobs, challenges, votes). Standing is computed from it on every read, so it
// cannot drift from the record.
type AgentRecord struct {
	RunsPublished      int // official runs published
	RunsUpheld         int // reproduced/not_reproduced runs settled with the run's own outcome
	RunsOverturned     int // reproduced/not_reproduced runs settled with another outcome after a dispute
	Abandoned          int // accepted jobs whose publish deadline passed
	ReasonlessDeclines int // declines with a reason other than capability_mismatch
	ChallengesUseful   int // disagreeing challenges whose side won the dispute
	ChallengesConfirm  int // agreeing challenges on runs that settled as published
	ChallengesBaseless int // disagreeing challenges whose side lost
	Challenges         int // all challenges posted
	Votes              int // all votes cast
	VotesWithMajority  int // votes on the side that decided a settled dispute
	VotesAgainst       int // votes on the losing side of a settled dispute
	Outcomes           map[Outcome]int
	Declines           map[string]int
}

// Standing weights (docs/mechanism.md "Standing").
const (
	WeightRunUpheld         = 1.0
	WeightRunOverturned     = -2.0
	WeightAbandoned         = -1.0
	WeightReasonlessDecline = -0.25
	WeightChallengeUseful   = 1.0
	WeightChallengeConfirm  = 0.25
	WeightChallengeBaseless = -1.0
	WeightVoteMajority      = 0.5
	WeightVoteAgainst       = -0.5
)

// Standing is the documented score of docs/mechanism.md: accurate runs up,
// overturned runs down, useful challenges up, baseless ones down, votes with
// the majority up, against it down, abandoned jobs and reasonless declines
// down. It starts at 0 and has no upper or lower bound.
func Standing(r AgentRecord) float64 {
	return WeightRunUpheld*float64(r.RunsUpheld) +
		WeightRunOverturned*float64(r.RunsOverturned) +
		WeightAbandoned*float64(r.Abandoned) +
		WeightReasonlessDecline*float64(r.ReasonlessDeclines) +
		WeightChallengeUseful*float64(r.ChallengesUseful) +
		WeightChallengeConfirm*float64(r.ChallengesConfirm) +
		WeightChallengeBaseless*float64(r.ChallengesBaseless) +
		WeightVoteMajority*float64(r.VotesWithMajority) +
		WeightVoteAgainst*float64(r.VotesAgainst)
}
