package dotlab

// Dispute is a disputed claim as a reviewer sees it (GET /disputes/next,
// docs/mechanism.md §4):
// the manifest, the official run, the challenges and the votes so far. Its
// id is the claim id.
type Dispute struct {
	ID         string       `json:"dispute_id"`
	Claim      *Claim       `json:"claim"`
	Run        *Run         `json:"run"`
	Challenges []*Challenge `json:"challenges"`
	Votes      []Vote       `json:"votes"`
	Quorum     int          `json:"quorum"`
	// Sealed is the current round of a dispute under sealed votes
	// (docs/mechanism.md §4a) until it is decided; Votes is empty until
	// then. Absent in the default mode and once decided.
	Sealed *Seal `json:"sealed,omitempty"`
}

// Tally counts the dispute's votes so far.
func (d *Dispute) Tally() Tally { return CountVotes(d.Votes) }
