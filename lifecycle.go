package dotlab

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// This file is the protocol's lifecycle in one place (docs/protocol.md §3
// "Lifecycle", §4 "Who may call what, when"; docs/mechanism.md): the windows,
// the claim state machine (state × event → next state, or an error code),
// and the rules that decide a challenge (agrees), a dispute (majority) and
// a declined offer. Everything here is pure; the store (sqlstore) asks it
// which move an event makes and runs the conditional UPDATE that makes the
// move hold under concurrency.

// Windows are the protocol's time windows and review quorum
// (docs/mechanism.md §2 "Windows"); all are flags of `dotlab serve`.
type Windows struct {
	Accept    time.Duration // offer → accept (default 60m)
	Publish   time.Duration // accept → POST /runs (default 24h)
	Challenge time.Duration // run published → settle (default 72h)
	Quorum    int           // votes that decide a dispute (default 3)
	// Sealed runs disputes with sealed votes (docs/mechanism.md §4a:
	// `--sealed-votes`): a committee of Quorum reviewers per round, votes
	// hidden until decided, commit then reveal. Off by default.
	Sealed bool
	// Commit and Reveal are a sealed round's windows: from the round's
	// start to its commit deadline, and from the commit phase's end to the
	// reveal deadline (defaults 24h each; used only when Sealed).
	Commit, Reveal time.Duration
}

// DefaultWindows are the documented defaults: 60 minutes, 24 hours, 72 hours, 3 votes.
var DefaultWindows = Windows{Accept: 60 * time.Minute, Publish: 24 * time.Hour, Challenge: 72 * time.Hour, Quorum: 3,
	Commit: DefaultSealedWindow, Reveal: DefaultSealedWindow}

// DefaultSealedWindow is the sealed round's commit and reveal window when
// none is set.
const DefaultSealedWindow = 24 * time.Hour

// SealedWindows are w's commit and reveal windows, DefaultSealedWindow
// where unset.
func (w Windows) SealedWindows() (commit, reveal time.Duration) {
	commit, reveal = w.Commit, w.Reveal
	if commit <= 0 {
		commit = DefaultSealedWindow
	}
	if reveal <= 0 {
		reveal = DefaultSealedWindow
	}
	return commit, reveal
}

// Event is something that happens to a claim: a call by an agent or a step
// of the settlement clock (docs/protocol.md §3 "Transitions").
type Event string

// The events, with who causes them.
const (
	EventList              Event = "list"               // POST /claims (submitter)
	EventOffer             Event = "offer"              // GET /jobs/next draws the claim (runner candidate)
	EventAccept            Event = "accept"             // POST /jobs/{id}/accept (the offered agent)
	EventDecline           Event = "decline"            // POST /jobs/{id}/decline (the offered agent)
	EventExpire            Event = "expire"             // the accept window passed (settlement clock)
	EventJoinRunner        Event = "join_runner"        // POST /labs/{id}/join role=runner (the assigned runner)
	EventAbandon           Event = "abandon"            // the publish deadline passed (settlement clock)
	EventPublish           Event = "publish"            // POST /runs, reproduced or not_reproduced (the assigned runner)
	EventPublishFinal      Event = "publish_final"      // POST /runs, spec_issue or input_mismatch (the assigned runner)
	EventChallengeAgree    Event = "challenge_agree"    // POST /challenges agrees=true (challenger)
	EventChallengeDisagree Event = "challenge_disagree" // POST /challenges agrees=false (challenger)
	EventWindowClose       Event = "window_close"       // the challenge deadline passed (settlement clock)
	EventVote              Event = "vote"               // POST /disputes/{id}/vote below the quorum (assigned reviewer)
	EventQuorum            Event = "quorum"             // POST /disputes/{id}/vote that reaches the quorum (assigned reviewer)
)

// Events lists every event in lifecycle order.
func Events() []Event {
	return []Event{EventList, EventOffer, EventAccept, EventDecline, EventExpire, EventJoinRunner, EventAbandon,
		EventPublish, EventPublishFinal, EventChallengeAgree, EventChallengeDisagree, EventWindowClose, EventVote, EventQuorum}
}

// PublishEvent is the event of publishing a run with outcome o: compared
// outcomes open the challenge window, the others settle at once.
func PublishEvent(o Outcome) Event {
	if o.Compared() {
		return EventPublish
	}
	return EventPublishFinal
}

// ChallengeEvent is the event of posting a challenge that agrees with the
// run or not (see Agrees).
func ChallengeEvent(agrees bool) Event {
	if agrees {
		return EventChallengeAgree
	}
	return EventChallengeDisagree
}

// VoteEvent is the event of a vote that brings the tally to t: the vote
// that reaches the quorum settles the dispute.
func VoteEvent(t Tally, quorum int) Event {
	if t.Reached(quorum) {
		return EventQuorum
	}
	return EventVote
}

// Transition is one allowed move of the claim state machine.
type Transition struct {
	// From is the claim's stored state ("" for a claim not listed yet).
	From  ClaimState
	Event Event
	// Via is a state recorded in the claim's history on the way and never
	// stored (listed, published, reviewed), or "".
	Via ClaimState
	// To is the stored state afterwards; To == From when the event moves
	// nothing and records no history.
	To ClaimState
	// JobFrom and JobTo are the job (the claim's offer to one agent) before
	// and after, or "" when the event touches no job.
	JobFrom, JobTo JobState
	// ToPool says the claim goes back to the pool: its offer or job ends,
	// it gets a new draw key, and that agent is never offered it again.
	ToPool bool
}

// Moves reports whether the event changes the claim's state.
func (t Transition) Moves() bool { return t.To != t.From }

// History lists the states the move records in the claim's history, in
// order (empty when nothing moves).
func (t Transition) History() []ClaimState {
	switch {
	case !t.Moves():
		return nil
	case t.Via != "":
		return []ClaimState{t.Via, t.To}
	}
	return []ClaimState{t.To}
}

// Transitions is the claim state machine of docs/protocol.md §3, one row per
// allowed (state, event). An event from a state not listed for it is refused
// (see Next). listed, published and reviewed are never stored: they appear
// only as Via.
func Transitions() []Transition {
	const (
		none      = ClaimState("")
		funded    = StateFunded
		assigned  = StateAssigned
		running   = StateRunning
		window    = StateChallengeWindow
		disputed  = StateDisputed
		settled   = StateSettled
		published = StatePublished
	)
	return []Transition{
		{From: none, Event: EventList, Via: StateListed, To: funded}, // at once: bounties are not live
		{From: funded, Event: EventOffer, To: funded, JobTo: JobOffered},
		{From: funded, Event: EventAccept, To: assigned, JobFrom: JobOffered, JobTo: JobAccepted},
		{From: funded, Event: EventDecline, To: funded, JobFrom: JobOffered, JobTo: JobDeclined, ToPool: true},
		{From: funded, Event: EventExpire, To: funded, JobFrom: JobOffered, JobTo: JobExpired, ToPool: true},
		{From: assigned, Event: EventJoinRunner, To: running},
		{From: running, Event: EventJoinRunner, To: running},
		{From: window, Event: EventJoinRunner, To: window},
		{From: disputed, Event: EventJoinRunner, To: disputed},
		{From: settled, Event: EventJoinRunner, To: settled},
		{From: assigned, Event: EventAbandon, To: funded, JobFrom: JobAccepted, JobTo: JobAbandoned, ToPool: true},
		{From: running, Event: EventAbandon, To: funded, JobFrom: JobAccepted, JobTo: JobAbandoned, ToPool: true},
		{From: assigned, Event: EventPublish, Via: published, To: window, JobFrom: JobAccepted, JobTo: JobPublished},
		{From: running, Event: EventPublish, Via: published, To: window, JobFrom: JobAccepted, JobTo: JobPublished},
		{From: assigned, Event: EventPublishFinal, Via: published, To: settled, JobFrom: JobAccepted, JobTo: JobPublished},
		{From: running, Event: EventPublishFinal, Via: published, To: settled, JobFrom: JobAccepted, JobTo: JobPublished},
		{From: window, Event: EventChallengeAgree, To: window},
		{From: disputed, Event: EventChallengeAgree, To: disputed},
		{From: window, Event: EventChallengeDisagree, To: disputed}, // the first disagreeing challenge
		{From: disputed, Event: EventChallengeDisagree, To: disputed},
		{From: window, Event: EventWindowClose, To: settled}, // with the run's outcome
		{From: disputed, Event: EventVote, To: disputed},
		{From: disputed, Event: EventQuorum, Via: StateReviewed, To: settled}, // with the majority's outcome
	}
}

// Next returns the move event ev makes from the stored state from, or an
// *Error whose code says why it is refused (docs/protocol.md §4 and §5):
// not_offered, conflict, window_closed or role_conflict. The detail names
// "the claim"; Claim.Next names the claim by id.
func Next(from ClaimState, ev Event) (Transition, error) {
	return next("the claim", from, ev)
}

// Next is the package-level Next for the claim's current state, with the
// claim's id in the refusal.
func (c *Claim) Next(ev Event) (Transition, error) {
	return next(c.ID, c.State, ev)
}

func next(subject string, from ClaimState, ev Event) (Transition, error) {
	for _, t := range Transitions() {
		if t.From == from && t.Event == ev {
			return t, nil
		}
	}
	code, format := refusal(from, ev)
	return Transition{}, Errorf(code, format, subject, from, Go(StepDrawJob, ""), Go(StepClaim, subject), Go(StepOpenRuns, ""), Go(StepDrawDispute, ""))
}

// refusal is the error code and detail (subject %[1]s, state %[2]s) of an
// event refused in state from.
func refusal(from ClaimState, ev Event) (code, format string) {
	switch ev {
	case EventList:
		return ECONFLICT, "%[1]s is listed already (state %[2]s)"
	case EventOffer:
		return EWINDOWCLOSED, "%[1]s is not in the pool (state %[2]s): %[3]s draws a job"
	case EventAccept, EventDecline:
		return ENOTOFFERED, "%[1]s is not offered to you now (its state is %[2]s): fetch a new job with %[3]s"
	case EventExpire:
		return EWINDOWCLOSED, "%[1]s has no offer to expire (state %[2]s)"
	case EventJoinRunner:
		return EROLECONFLICT, "only the assigned runner of %[1]s joins as runner, once it has accepted the job (state %[2]s)"
	case EventAbandon:
		return EWINDOWCLOSED, "%[1]s has no job in progress (state %[2]s)"
	case EventPublish, EventPublishFinal:
		if from == StateFunded || from == StateListed || from == "" {
			return ENOTOFFERED, "%[1]s is not assigned to you: only the assigned runner publishes the official run; take a job of your own with %[3]s"
		}
		return ECONFLICT, "the run of %[1]s is already published (state %[2]s): %[4]s gives its run_url"
	case EventChallengeAgree, EventChallengeDisagree, EventWindowClose:
		return EWINDOWCLOSED, "%[1]s is not in its challenge window (state %[2]s): %[5]s lists the runs open to challenge"
	case EventVote, EventQuorum:
		return EWINDOWCLOSED, "%[1]s is not disputed (state %[2]s): nothing to vote on; %[6]s draws a dispute for you to review"
	}
	return EINVALID, "%[1]s: unknown event in state %[2]s"
}

// Sources lists the states event ev is allowed from, in lifecycle order:
// the WHERE state IN (…) of the store's conditional UPDATE.
func Sources(ev Event) []ClaimState {
	var out []ClaimState
	for _, t := range Transitions() {
		if t.Event == ev {
			out = append(out, t.From)
		}
	}
	return out
}

// Agrees is the agrees rule (docs/mechanism.md §3, docs/protocol.md §7): a
// challenge agrees with the run when its outcome equals the run's outcome.
// Agreement is decided by the outcomes, not by how close the numbers are;
// targets whose match differs (Difference.MatchDiffers) are what a
// disagreeing challenge's notes must name (CheckDisagreementNotes).
func Agrees(run, challenge Outcome) bool { return run == challenge }

// CheckAgrees checks the agrees field a challenger declared against the
// rule: an EINVALID error naming the value to set, or nil.
func CheckAgrees(declared bool, run, challenge Outcome) error {
	same := Agrees(run, challenge)
	if declared == same {
		return nil
	}
	verb := "differs from"
	if same {
		verb = "equals"
	}
	return Errorf(EINVALID, "$.agrees: is %v but your outcome %s %s the run's outcome %s: set agrees to %v",
		declared, challenge, verb, run, same)
}

// Tally counts a dispute's votes by side.
type Tally struct {
	Runner, Challenger int
}

// CountVotes tallies votes by side.
func CountVotes(votes []Vote) Tally {
	var t Tally
	for _, v := range votes {
		switch v.Vote {
		case VoteRunner:
			t.Runner++
		case VoteChallenger:
			t.Challenger++
		}
	}
	return t
}

// Total is the number of votes.
func (t Tally) Total() int { return t.Runner + t.Challenger }

// Reached reports whether the votes reach the quorum, so the dispute is decided.
func (t Tally) Reached(quorum int) bool { return t.Total() >= quorum }

// Majority is the majority rule (docs/mechanism.md §4 "Quorum and
// majority"): the challenger side wins with more challenger than runner
// votes; otherwise, ties included, the runner side wins. `dotlab serve`
// refuses an even quorum, so a decided tally never ties.
func (t Tally) Majority() string {
	if t.Challenger > t.Runner {
		return VoteChallenger
	}
	return VoteRunner
}

// String is "1 runner, 2 challenger".
func (t Tally) String() string {
	return fmt.Sprintf("%d runner, %d challenger", t.Runner, t.Challenger)
}

// Verdict is the outcome a dispute settles with when side wins: the run's
// outcome for the runner side, the outcome of the first disagreeing
// challenge (FirstDisagreeing) for the challenger side.
func Verdict(side string, run, firstDisagreeing Outcome) Outcome {
	if side == VoteChallenger {
		return firstDisagreeing
	}
	return run
}

// WinningSide reads a settled dispute backwards: the runner side won when
// the final outcome equals the run's outcome (docs/mechanism.md §6).
func WinningSide(final, run Outcome) string {
	if final == run {
		return VoteRunner
	}
	return VoteChallenger
}

// FirstDisagreeing returns the first disagreeing challenge, the earliest by
// time, then by id, or nil when every challenge agrees. Its outcome is the
// challenger side's outcome, whatever later disagreeing challenges say.
func FirstDisagreeing(chs []*Challenge) *Challenge {
	var first *Challenge
	for _, ch := range chs {
		if ch.Agrees {
			continue
		}
		if first == nil || ch.CreatedAt.Before(first.CreatedAt) || (ch.CreatedAt.Equal(first.CreatedAt) && ch.ID < first.ID) {
			first = ch
		}
	}
	return first
}

// MaxDeclineReason is the longest decline reason, in characters.
const MaxDeclineReason = 500

// Decline is what declining an offer does (docs/mechanism.md §1 "Offers"):
// the job becomes declined and the claim returns to the pool at once (the
// EventDecline row of Transitions); the agent is never offered the claim
// again; and unless the reason is exactly capability_mismatch the decline
// counts as reasonless in standing (docs/mechanism.md §6). A decline with
// no reason at all (an empty body, {}, or a blank reason) is allowed and
// is reasonless.
type Decline struct {
	Reason     string // trimmed; "" when none was given
	Reasonless bool
	Transition Transition
}

// DeclineEffect checks a decline reason (optional: at most 500 characters
// after trimming; any text) and returns what the decline does, or an
// EINVALID error.
func DeclineEffect(reason string) (Decline, error) {
	reason = strings.TrimSpace(reason)
	if l := utf8.RuneCountInString(reason); l > MaxDeclineReason {
		return Decline{}, Errorf(EINVALID, "$.reason: is %d characters; at most %d (or leave it out: a decline without capability_mismatch counts as reasonless)", l, MaxDeclineReason)
	}
	t, err := Next(StateFunded, EventDecline)
	if err != nil {
		return Decline{}, err
	}
	return Decline{Reason: reason, Reasonless: ReasonlessDecline(reason), Transition: t}, nil
}

// ReasonlessDecline reports whether a decline with reason counts against
// standing: every reason but capability_mismatch does, no reason ("")
// included.
func ReasonlessDecline(reason string) bool { return reason != DeclineCapabilityMismatch }

// SettleReport counts what one settlement sweep did (docs/mechanism.md §5
// "Settlement clock").
type SettleReport struct {
	// Changed lists the claims whose state changed (for live views).
	Changed       []string `json:"-"`
	OffersExpired int      `json:"offers_expired"`
	JobsAbandoned int      `json:"jobs_abandoned"`
	ClaimsSettled int      `json:"claims_settled"`
	// Lags says, for each change applied (in the order of Changed), how
	// late it was applied after falling due (the metric
	// dotlab_settlement_lag_seconds; docs/deploy.md "Metrics").
	Lags []SettleLag `json:"-"`
}

// SettleLag is how late the settlement clock applied one change: the time
// the change committed minus the deadline that made it due (the offer's
// expiry, the publish deadline or the challenge deadline). Event is
// EventExpire, EventAbandon or EventWindowClose.
type SettleLag struct {
	Event Event
	Late  time.Duration
}

// Empty reports whether the sweep changed nothing.
func (r SettleReport) Empty() bool { return len(r.Changed) == 0 }

func (r SettleReport) String() string {
	return fmt.Sprintf("%d offers expired, %d jobs abandoned, %d claims settled", r.OffersExpired, r.JobsAbandoned, r.ClaimsSettled)
}
