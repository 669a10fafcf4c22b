package dotlab_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
)

// allowed is docs/protocol.md §3 "Transitions" (and §4 "When" for the calls
// that move nothing), written out independently of dotlab.Transitions.
var allowed = []struct {
	name           string
	from           dotlab.ClaimState
	ev             dotlab.Event
	history        []dotlab.ClaimState // recorded in the claim's history; nil when nothing moves
	to             dotlab.ClaimState
	jobFrom, jobTo dotlab.JobState
	toPool         bool
}{
	{"POST /claims: (none) → listed → funded", "", dotlab.EventList, []dotlab.ClaimState{"listed", "funded"}, "funded", "", "", false},
	{"GET /jobs/next offers: funded stays funded", "funded", dotlab.EventOffer, nil, "funded", "", "offered", false},
	{"POST /jobs/{id}/accept: funded → assigned", "funded", dotlab.EventAccept, []dotlab.ClaimState{"assigned"}, "assigned", "offered", "accepted", false},
	{"POST /jobs/{id}/decline: offer ends, back in the pool", "funded", dotlab.EventDecline, nil, "funded", "offered", "declined", true},
	{"clock: offer not accepted in time, back in the pool", "funded", dotlab.EventExpire, nil, "funded", "offered", "expired", true},
	{"POST /labs/{id}/join runner: assigned → running", "assigned", dotlab.EventJoinRunner, []dotlab.ClaimState{"running"}, "running", "", "", false},
	{"join runner again while running", "running", dotlab.EventJoinRunner, nil, "running", "", "", false},
	{"join runner after publishing", "challenge_window", dotlab.EventJoinRunner, nil, "challenge_window", "", "", false},
	{"join runner while disputed", "disputed", dotlab.EventJoinRunner, nil, "disputed", "", "", false},
	{"join runner after settlement", "settled", dotlab.EventJoinRunner, nil, "settled", "", "", false},
	{"clock: publish deadline missed, assigned → funded", "assigned", dotlab.EventAbandon, []dotlab.ClaimState{"funded"}, "funded", "accepted", "abandoned", true},
	{"clock: publish deadline missed, running → funded", "running", dotlab.EventAbandon, []dotlab.ClaimState{"funded"}, "funded", "accepted", "abandoned", true},
	{"POST /runs reproduced: assigned → published → challenge_window", "assigned", dotlab.EventPublish, []dotlab.ClaimState{"published", "challenge_window"}, "challenge_window", "accepted", "published", false},
	{"POST /runs reproduced: running → published → challenge_window", "running", dotlab.EventPublish, []dotlab.ClaimState{"published", "challenge_window"}, "challenge_window", "accepted", "published", false},
	{"POST /runs spec_issue: assigned → published → settled", "assigned", dotlab.EventPublishFinal, []dotlab.ClaimState{"published", "settled"}, "settled", "accepted", "published", false},
	{"POST /runs input_mismatch: running → published → settled", "running", dotlab.EventPublishFinal, []dotlab.ClaimState{"published", "settled"}, "settled", "accepted", "published", false},
	{"agreeing challenge changes no state", "challenge_window", dotlab.EventChallengeAgree, nil, "challenge_window", "", "", false},
	{"agreeing challenge while disputed", "disputed", dotlab.EventChallengeAgree, nil, "disputed", "", "", false},
	{"first disagreeing challenge: challenge_window → disputed", "challenge_window", dotlab.EventChallengeDisagree, []dotlab.ClaimState{"disputed"}, "disputed", "", "", false},
	{"later disagreeing challenge while disputed", "disputed", dotlab.EventChallengeDisagree, nil, "disputed", "", "", false},
	{"clock: window closes without disagreement → settled", "challenge_window", dotlab.EventWindowClose, []dotlab.ClaimState{"settled"}, "settled", "", "", false},
	{"vote below the quorum", "disputed", dotlab.EventVote, nil, "disputed", "", "", false},
	{"vote reaching the quorum: disputed → reviewed → settled", "disputed", dotlab.EventQuorum, []dotlab.ClaimState{"reviewed", "settled"}, "settled", "", "", false},
}

func TestNextAllowed(t *testing.T) {
	for _, c := range allowed {
		t.Run(c.name, func(t *testing.T) {
			tr, err := dotlab.Next(c.from, c.ev)
			if err != nil {
				t.Fatalf("Next(%q, %s): %v", c.from, c.ev, err)
			}
			if tr.From != c.from || tr.Event != c.ev || tr.To != c.to || tr.JobFrom != c.jobFrom || tr.JobTo != c.jobTo || tr.ToPool != c.toPool {
				t.Errorf("Next(%q, %s) = %+v", c.from, c.ev, tr)
			}
			if got := tr.History(); !equalStates(got, c.history) {
				t.Errorf("history %v, want %v", got, c.history)
			}
			if tr.Moves() != (len(c.history) > 0) {
				t.Errorf("Moves() = %v with history %v", tr.Moves(), c.history)
			}
			for _, s := range tr.History() {
				if !s.Valid() {
					t.Errorf("history state %q is not a claim state", s)
				}
			}
		})
	}
	if n := len(dotlab.Transitions()); n != len(allowed) {
		t.Errorf("dotlab.Transitions has %d rows, the documented table %d", n, len(allowed))
	}
}

// TestNextRefused tries every event from every state (and from no state)
// the documented table does not allow, and checks the error code of
// docs/protocol.md §4.
func TestNextRefused(t *testing.T) {
	ok := map[[2]string]bool{}
	for _, c := range allowed {
		ok[[2]string{string(c.from), string(c.ev)}] = true
	}
	want := func(from dotlab.ClaimState, ev dotlab.Event) string {
		switch ev {
		case dotlab.EventList:
			return dotlab.ECONFLICT
		case dotlab.EventAccept, dotlab.EventDecline:
			return dotlab.ENOTOFFERED // offer not open: not offered to you now
		case dotlab.EventJoinRunner:
			return dotlab.EROLECONFLICT // no assigned runner yet
		case dotlab.EventPublish, dotlab.EventPublishFinal:
			switch from {
			case "", dotlab.StateListed, dotlab.StateFunded:
				return dotlab.ENOTOFFERED // not your job (yet)
			}
			return dotlab.ECONFLICT // already published
		}
		return dotlab.EWINDOWCLOSED // the claim is not in the needed state
	}
	states := append([]dotlab.ClaimState{""}, dotlab.ClaimStates...)
	refused := 0
	for _, from := range states {
		for _, ev := range dotlab.Events() {
			if ok[[2]string{string(from), string(ev)}] {
				continue
			}
			refused++
			_, err := dotlab.Next(from, ev)
			var e *dotlab.Error
			if !errors.As(err, &e) {
				t.Errorf("Next(%q, %s) = %v, want an *Error", from, ev, err)
				continue
			}
			if e.Code != want(from, ev) {
				t.Errorf("Next(%q, %s): code %s, want %s (%v)", from, ev, e.Code, want(from, ev), err)
			}
		}
	}
	if refused == 0 {
		t.Fatal("nothing refused")
	}
}

func TestClaimNextNamesTheClaim(t *testing.T) {
	cases := []struct {
		state dotlab.ClaimState
		ev    dotlab.Event
		code  string
		says  string
	}{
		{dotlab.StateSettled, dotlab.EventChallengeDisagree, dotlab.EWINDOWCLOSED, "DL-0007 is not in its challenge window (state settled)"},
		{dotlab.StateChallengeWindow, dotlab.EventPublish, dotlab.ECONFLICT, "the run of DL-0007 is already published (state challenge_window)"},
		{dotlab.StateFunded, dotlab.EventPublishFinal, dotlab.ENOTOFFERED, "DL-0007 is not assigned to you"},
		{dotlab.StateSettled, dotlab.EventVote, dotlab.EWINDOWCLOSED, "DL-0007 is not disputed (state settled)"},
		{dotlab.StateAssigned, dotlab.EventDecline, dotlab.ENOTOFFERED, "DL-0007 is not offered to you now (its state is assigned)"},
	}
	for _, c := range cases {
		_, err := (&dotlab.Claim{ID: "DL-0007", State: c.state}).Next(c.ev)
		if dotlab.ErrorCode(err) != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s from %s: %v, want %s saying %q", c.ev, c.state, err, c.code, c.says)
		}
	}
}

func TestSources(t *testing.T) {
	cases := map[dotlab.Event][]dotlab.ClaimState{
		dotlab.EventAccept:            {"funded"},
		dotlab.EventAbandon:           {"assigned", "running"},
		dotlab.EventPublish:           {"assigned", "running"},
		dotlab.EventPublishFinal:      {"assigned", "running"},
		dotlab.EventChallengeAgree:    {"challenge_window", "disputed"},
		dotlab.EventChallengeDisagree: {"challenge_window", "disputed"},
		dotlab.EventWindowClose:       {"challenge_window"},
		dotlab.EventQuorum:            {"disputed"},
	}
	for ev, want := range cases {
		if got := dotlab.Sources(ev); !equalStates(got, want) {
			t.Errorf("Sources(%s) = %v, want %v", ev, got, want)
		}
	}
}

// TestStatesAreSQLSafe: the store writes the domain's states into
// "state IN (…)" lists (sqlstore.sources), so they must stay plain
// identifiers.
func TestStatesAreSQLSafe(t *testing.T) {
	for _, s := range dotlab.ClaimStates {
		for _, r := range s {
			if (r < 'a' || r > 'z') && r != '_' {
				t.Errorf("state %q has %q", s, r)
			}
		}
	}
}

func TestEventFor(t *testing.T) {
	for o, want := range map[dotlab.Outcome]dotlab.Event{
		dotlab.OutcomeReproduced:    dotlab.EventPublish,
		dotlab.OutcomeNotReproduced: dotlab.EventPublish,
		dotlab.OutcomeSpecIssue:     dotlab.EventPublishFinal,
		dotlab.OutcomeInputMismatch: dotlab.EventPublishFinal,
	} {
		if got := dotlab.PublishEvent(o); got != want {
			t.Errorf("PublishEvent(%s) = %s, want %s", o, got, want)
		}
	}
	if dotlab.ChallengeEvent(true) != dotlab.EventChallengeAgree || dotlab.ChallengeEvent(false) != dotlab.EventChallengeDisagree {
		t.Error("ChallengeEvent")
	}
	if dotlab.VoteEvent(dotlab.Tally{Runner: 1, Challenger: 1}, 3) != dotlab.EventVote ||
		dotlab.VoteEvent(dotlab.Tally{Runner: 1, Challenger: 2}, 3) != dotlab.EventQuorum {
		t.Error("VoteEvent")
	}
}

// TestAgreesRule is docs/mechanism.md §3 "The agrees rule": the outcomes
// decide, not how close the numbers are.
func TestAgreesRule(t *testing.T) {
	O := func(s string) dotlab.Outcome { return dotlab.Outcome(s) }
	cases := []struct {
		run, ch  dotlab.Outcome
		agrees   bool
		declared bool
		fix      string // "" when the declared value is right
	}{
		{O("reproduced"), O("reproduced"), true, true, ""},
		{O("reproduced"), O("not_reproduced"), false, false, ""},
		{O("not_reproduced"), O("reproduced"), false, false, ""},
		{O("not_reproduced"), O("not_reproduced"), true, true, ""},
		{O("reproduced"), O("spec_issue"), false, false, ""},
		{O("reproduced"), O("input_mismatch"), false, false, ""},
		{O("reproduced"), O("reproduced"), true, false, "set agrees to true"},
		{O("reproduced"), O("not_reproduced"), false, true, "set agrees to false"},
	}
	for _, c := range cases {
		if got := dotlab.Agrees(c.run, c.ch); got != c.agrees {
			t.Errorf("Agrees(%s, %s) = %v", c.run, c.ch, got)
		}
		err := dotlab.CheckAgrees(c.declared, c.run, c.ch)
		switch {
		case c.fix == "" && err != nil:
			t.Errorf("CheckAgrees(%v, %s, %s): %v", c.declared, c.run, c.ch, err)
		case c.fix != "" && (dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), c.fix)):
			t.Errorf("CheckAgrees(%v, %s, %s) = %v, want invalid saying %q", c.declared, c.run, c.ch, err, c.fix)
		}
	}
	// Per target: only the targets whose match differs must be named.
	diffs := []dotlab.Difference{
		{Name: "mean_diff", RunnerMatch: true, ChallengerMatch: true},
		{Name: "sd_diff", RunnerMatch: true, ChallengerMatch: false},
		{Name: "t_paired", RunnerMatch: false, ChallengerMatch: true},
		{Name: "n", RunnerMatch: false, ChallengerMatch: false},
	}
	var differ []string
	for _, d := range diffs {
		if d.MatchDiffers() {
			differ = append(differ, d.Name)
		}
	}
	if strings.Join(differ, ",") != "sd_diff,t_paired" {
		t.Errorf("MatchDiffers picks %v", differ)
	}
}

// TestMajorityRule is docs/mechanism.md §4 "Quorum and majority".
func TestMajorityRule(t *testing.T) {
	cases := []struct {
		runner, challenger int
		quorum             int
		reached            bool
		side               string
		tally              string
	}{
		{0, 0, 3, false, "runner", "0 runner, 0 challenger"},
		{1, 1, 3, false, "runner", "1 runner, 1 challenger"},
		{0, 2, 3, false, "challenger", "0 runner, 2 challenger"},
		{3, 0, 3, true, "runner", "3 runner, 0 challenger"},
		{2, 1, 3, true, "runner", "2 runner, 1 challenger"},
		{1, 2, 3, true, "challenger", "1 runner, 2 challenger"},
		{0, 3, 3, true, "challenger", "0 runner, 3 challenger"},
		{2, 2, 4, true, "runner", "2 runner, 2 challenger"}, // a tie (even quorum, refused by serve) goes to the runner
		{0, 1, 1, true, "challenger", "0 runner, 1 challenger"},
	}
	for _, c := range cases {
		var votes []dotlab.Vote
		for i := 0; i < c.runner; i++ {
			votes = append(votes, dotlab.Vote{Vote: dotlab.VoteRunner})
		}
		for i := 0; i < c.challenger; i++ {
			votes = append(votes, dotlab.Vote{Vote: dotlab.VoteChallenger})
		}
		tl := dotlab.CountVotes(votes)
		if tl != (dotlab.Tally{Runner: c.runner, Challenger: c.challenger}) || tl.Total() != c.runner+c.challenger {
			t.Errorf("CountVotes = %+v", tl)
		}
		if tl.Reached(c.quorum) != c.reached || tl.Majority() != c.side || tl.String() != c.tally {
			t.Errorf("%+v quorum %d: reached %v, majority %s, %q", tl, c.quorum, tl.Reached(c.quorum), tl.Majority(), tl)
		}
		if d := (&dotlab.Dispute{Votes: votes}); d.Tally() != tl {
			t.Errorf("Dispute.Tally = %+v", d.Tally())
		}
	}
	run, first := dotlab.OutcomeReproduced, dotlab.OutcomeNotReproduced
	if dotlab.Verdict(dotlab.VoteRunner, run, first) != run || dotlab.Verdict(dotlab.VoteChallenger, run, first) != first {
		t.Error("Verdict: runner side gives the run's outcome, challenger side the first disagreeing challenge's")
	}
	if dotlab.WinningSide(run, run) != dotlab.VoteRunner || dotlab.WinningSide(first, run) != dotlab.VoteChallenger {
		t.Error("WinningSide")
	}
}

func TestFirstDisagreeing(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ch := func(id string, agrees bool, at time.Duration, o dotlab.Outcome) *dotlab.Challenge {
		return &dotlab.Challenge{ID: id, Agrees: agrees, CreatedAt: t0.Add(at), Outcome: o}
	}
	chs := []*dotlab.Challenge{
		ch("ch_a", true, 0, dotlab.OutcomeReproduced),
		ch("ch_d", false, 2*time.Second, dotlab.OutcomeSpecIssue),
		ch("ch_c", false, time.Second, dotlab.OutcomeNotReproduced),
		ch("ch_b", false, time.Second, dotlab.OutcomeInputMismatch), // same time as ch_c: the lower id first
	}
	if got := dotlab.FirstDisagreeing(chs); got == nil || got.ID != "ch_b" {
		t.Errorf("FirstDisagreeing = %+v, want ch_b", got)
	}
	if got := dotlab.FirstDisagreeing(chs[:1]); got != nil {
		t.Errorf("FirstDisagreeing of agreeing challenges = %+v, want nil", got)
	}
}

// TestDeclineRule is docs/mechanism.md §1 "Offers" and §6: a decline ends
// the job, returns the claim to the pool, and costs standing unless the
// reason is exactly capability_mismatch.
func TestDeclineRule(t *testing.T) {
	cases := []struct {
		reason     string
		ok         bool
		trimmed    string
		reasonless bool
	}{
		{"capability_mismatch", true, "capability_mismatch", false},
		{"  capability_mismatch\n", true, "capability_mismatch", false},
		{"Capability_mismatch", true, "Capability_mismatch", true},
		{"capability_mismatch: no GPU", true, "capability_mismatch: no GPU", true},
		{"busy", true, "busy", true},
		{"", true, "", true},    // no reason: reasonless
		{"   ", true, "", true}, // blank: no reason
		{strings.Repeat("é", 500), true, strings.Repeat("é", 500), true},
		{strings.Repeat("é", 501), false, "", false},
	}
	for _, c := range cases {
		d, err := dotlab.DeclineEffect(c.reason)
		if !c.ok {
			if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.reason") {
				t.Errorf("DeclineEffect(%.20q) = %v, want invalid $.reason", c.reason, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("DeclineEffect(%.20q): %v", c.reason, err)
			continue
		}
		tr := d.Transition
		if d.Reason != c.trimmed || d.Reasonless != c.reasonless || tr.From != dotlab.StateFunded || tr.To != dotlab.StateFunded ||
			tr.JobFrom != dotlab.JobOffered || tr.JobTo != dotlab.JobDeclined || !tr.ToPool || tr.Moves() {
			t.Errorf("DeclineEffect(%.20q) = %+v", c.reason, d)
		}
		if dotlab.ReasonlessDecline(d.Reason) != c.reasonless {
			t.Errorf("ReasonlessDecline(%.20q)", d.Reason)
		}
	}
}

// TestRecordRules is the record side of docs/mechanism.md §6: what each run,
// job, challenge and vote counts once its claim settles.
func TestRecordRules(t *testing.T) {
	const (
		rep = dotlab.OutcomeReproduced
		not = dotlab.OutcomeNotReproduced
		si  = dotlab.OutcomeSpecIssue
	)
	var r dotlab.AgentRecord
	r.AddRun(rep, true, rep, true)  // upheld, with a complete log
	r.AddRun(rep, true, rep, false) // upheld, log incomplete or missing
	r.AddRun(not, true, rep, true)  // overturned: its complete log earns nothing
	r.AddRun(rep, false, "", true)  // not settled: counts 0
	r.AddRun(si, true, si, true)    // settles at once: counts 0, its log too
	r.AddJobEnd(dotlab.JobAbandoned, "")
	r.AddJobEnd(dotlab.JobDeclined, dotlab.DeclineCapabilityMismatch)
	r.AddJobEnd(dotlab.JobDeclined, "busy")
	r.AddJobEnd(dotlab.JobExpired, "")               // ignoring an offer costs nothing
	r.AddChallenge(false, not, true, not)            // useful
	r.AddChallenge(false, si, true, not)             // baseless, though the challenger side won
	r.AddChallenge(true, rep, true, rep)             // confirming
	r.AddChallenge(true, rep, true, not)             // agreeing with an overturned run: 0
	r.AddChallenge(false, not, false, "")            // not settled: 0
	r.AddVote(dotlab.VoteRunner, true, rep, rep)     // with the majority
	r.AddVote(dotlab.VoteChallenger, true, not, rep) // with the majority
	r.AddVote(dotlab.VoteRunner, true, not, rep)     // against
	r.AddVote(dotlab.VoteChallenger, false, "", rep) // not settled: 0
	want := dotlab.AgentRecord{RunsPublished: 5, RunsUpheld: 2, RunsWellLogged: 1, RunsOverturned: 1, Abandoned: 1, ReasonlessDeclines: 1,
		ChallengesUseful: 1, ChallengesConfirm: 1, ChallengesBaseless: 1, Challenges: 5, Votes: 4, VotesWithMajority: 2, VotesAgainst: 1}
	got := r
	got.Outcomes, got.Declines = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("record\n got %+v\nwant %+v", got, want)
	}
	if r.Outcomes[rep] != 3 || r.Outcomes[not] != 1 || r.Outcomes[si] != 1 {
		t.Errorf("outcomes %v", r.Outcomes)
	}
	if r.Declines["busy"] != 1 || r.Declines[dotlab.DeclineCapabilityMismatch] != 1 || len(r.Declines) != 2 {
		t.Errorf("declines %v", r.Declines)
	}
	// 2×1 + 0.5 − 2 − 1 − 0.25 + 1 + 0.25 − 1 + 2×0.5 − 0.5
	if s := dotlab.Standing(r); s != 0 {
		t.Errorf("standing %v, want 0", s)
	}
}

func equalStates(a, b []dotlab.ClaimState) bool {
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
