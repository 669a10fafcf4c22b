package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
)

// sealedWindows are fast windows with sealed votes: 10 s to commit, 10 s
// to reveal (docs/mechanism.md §4a).
var sealedWindows = dotlab.Windows{Accept: time.Second, Publish: time.Second, Challenge: time.Second, Quorum: 3,
	Sealed: true, Commit: 10 * time.Second, Reveal: 10 * time.Second}

// sealedWorld is a world whose store runs sealed votes, with one claim
// disputed (a not_reproduced run and a disagreeing challenge) and five
// would-be reviewers.
type sealedWorld struct {
	*world
	p         *protocol.Service
	id        string
	runner    *dotlab.Agent
	reviewers []*dotlab.Agent
}

const sealedRationale = "sd_diff: Student divides by n; 1.17 matches within 0.005, 1.2299 does not"

func forEachSealedWorld(t *testing.T, fn func(t *testing.T, w *sealedWorld)) {
	for _, e := range sqlstoretest.Engines {
		t.Run(string(e), func(t *testing.T) {
			clock := sqlstoretest.NewClock()
			db := sqlstoretest.Open(t, e, sqlstore.Options{Clock: clock, Windows: sealedWindows})
			w := &sealedWorld{world: &world{t: t, db: db, clock: clock}, p: sqlstoretest.Protocol(db)}
			w.sub = mustAgent(t, db, "submitter")
			w.runner = mustAgent(t, db, "runner")
			challenger := mustAgent(t, db, "challenger")
			for i := 0; i < 5; i++ {
				w.reviewers = append(w.reviewers, mustAgent(t, db, fmt.Sprintf("reviewer%d", i)))
			}
			ctx := context.Background()
			w.id = w.assigned("sealed dispute", w.runner)
			if _, err := w.p.PublishRun(ctx, w.runner, sqlstoretest.RunBody(w.id, "1.58", "1.2299", dotlab.OutcomeNotReproduced), nil); err != nil {
				t.Fatal(err)
			}
			body := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(w.id, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: w.id, Agrees: agree(false)}
			body.Notes = "sd_diff: my rerun gives 1.17 (dividing by n, as Student did); the run's 1.2299 differs by 0.0599"
			if _, err := w.p.CreateChallenge(ctx, challenger, body, nil); err != nil {
				t.Fatal(err)
			}
			fn(t, w)
		})
	}
}

// draw has reviewer i draw the dispute and checks it got it.
func (w *sealedWorld) draw(i int) *dotlab.Dispute {
	w.t.Helper()
	d, found, err := w.p.NextDispute(context.Background(), w.reviewers[i].ID)
	if err != nil || !found || d.ID != w.id {
		w.t.Fatalf("reviewer %d draw: %+v %v %v", i, d, found, err)
	}
	return d
}

// TestSealedVotesHiddenUntilDecided: under --sealed-votes, votes posted as
// the skill text says are sealed by the server: the third reviewer and
// the public see only commitments until the dispute is decided; then the
// votes, their salts and the logged commitments agree.
func TestSealedVotesHiddenUntilDecided(t *testing.T) {
	forEachSealedWorld(t, func(t *testing.T, w *sealedWorld) {
		ctx := context.Background()
		for i, side := range []string{"challenger", "runner"} {
			w.draw(i)
			if _, err := w.p.CastVote(ctx, w.reviewers[i], w.id, dotlab.VoteBody{Vote: side, Rationale: sealedRationale}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := w.p.CastVote(ctx, w.reviewers[0], w.id, dotlab.VoteBody{Vote: "runner", Rationale: sealedRationale})
		wantCode(t, err, dotlab.ECONFLICT)
		third := w.draw(2)
		public, err := w.db.FindDispute(ctx, w.id)
		if err != nil {
			t.Fatal(err)
		}
		for who, d := range map[string]*dotlab.Dispute{"third reviewer": third, "public": public} {
			if len(d.Votes) != 0 || d.Sealed == nil || d.Sealed.Phase != dotlab.PhaseCommit || len(d.Sealed.Votes) != 3 {
				t.Fatalf("%s sees %+v / %+v", who, d.Votes, d.Sealed)
			}
			for _, v := range d.Sealed.Votes[:2] {
				if len(v.Commitment) != 64 || v.CommittedAt == nil {
					t.Fatalf("%s: sealed entry %+v", who, v)
				}
			}
		}
		if p, _ := w.db.FindAgent(ctx, w.reviewers[0].ID); p.Votes != 0 {
			t.Fatalf("a sealed vote counted on the public profile before the decision: %+v", p)
		}
		// The committee is full: a fourth reviewer is not seated.
		if _, found, _ := w.p.NextDispute(ctx, w.reviewers[3].ID); found {
			t.Fatal("a fourth reviewer seated on a full committee")
		}
		d, err := w.p.CastVote(ctx, w.reviewers[2], w.id, dotlab.VoteBody{Vote: "challenger", Rationale: sealedRationale})
		if err != nil {
			t.Fatal(err)
		}
		if c := w.state(w.id); c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeReproduced {
			t.Fatalf("after the third vote: %s %s", c.State, c.Outcome)
		}
		if len(d.Votes) != 3 || d.Sealed != nil {
			t.Fatalf("decided dispute: votes %+v sealed %+v", d.Votes, d.Sealed)
		}
		for _, v := range d.Votes {
			checkLoggedCommitment(t, w.db, v)
		}
	})
}

// checkLoggedCommitment checks that the log holds v's commitment and that
// the revealed vote, rationale and salt hash to it.
func checkLoggedCommitment(t *testing.T, db *sqlstore.DB, v dotlab.Vote) {
	t.Helper()
	if v.Salt == "" {
		t.Fatalf("decided sealed vote without its salt: %+v", v)
	}
	want := dotlab.VoteCommitment(v.ClaimID, v.ReviewerID, v.Vote, v.Rationale, v.Salt)
	deadline := time.Now().Add(3 * time.Second)
	for {
		e, err := db.Log().Lookup(context.Background(), tlogfmt.TypeCommitment, tlogfmt.VoteID(v.ClaimID, v.ReviewerID))
		if err == nil {
			if !strings.Contains(string(e.Data), want) {
				t.Fatalf("logged commitment %s does not hold %s", e.Data, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("commitment of %s not in the log: %v", v.ReviewerID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSealedCommitReveal: the commit-reveal flow. A reveal before the
// reveal phase and a reveal that does not match its commitment are
// refused; a commitment left unrevealed at the reveal deadline abstains
// (standing WeightAbstained), and the revealed votes decide.
func TestSealedCommitReveal(t *testing.T) {
	forEachSealedWorld(t, func(t *testing.T, w *sealedWorld) {
		ctx := context.Background()
		sides := []string{"runner", "runner", "challenger"}
		salt := func(i int) string { return strings.Repeat(fmt.Sprint(i), 40) }
		for i, side := range sides {
			w.draw(i)
			c := dotlab.VoteCommitment(w.id, w.reviewers[i].ID, side, sealedRationale, salt(i))
			if _, err := w.p.CommitVote(ctx, w.reviewers[i], w.id, dotlab.CommitBody{Commitment: c}); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				_, err := w.p.RevealVote(ctx, w.reviewers[0], w.id, dotlab.RevealBody{VoteBody: dotlab.VoteBody{Vote: side, Rationale: sealedRationale}, Salt: salt(0)})
				wantCode(t, err, dotlab.ECONFLICT) // still committing
				_, err = w.p.CastVote(ctx, w.reviewers[0], w.id, dotlab.VoteBody{Vote: side, Rationale: sealedRationale})
				wantCode(t, err, dotlab.ECONFLICT) // committed already
			}
		}
		if d, _ := w.db.FindDispute(ctx, w.id); d.Sealed == nil || d.Sealed.Phase != dotlab.PhaseReveal || d.Sealed.RevealDeadline == nil {
			t.Fatalf("after three commitments: %+v", d.Sealed)
		}
		_, err := w.p.CommitVote(ctx, w.reviewers[0], w.id, dotlab.CommitBody{Commitment: strings.Repeat("a", 64)})
		wantCode(t, err, dotlab.ECONFLICT)
		// A reveal that does not match: another side, then another salt.
		_, err = w.p.RevealVote(ctx, w.reviewers[0], w.id, dotlab.RevealBody{VoteBody: dotlab.VoteBody{Vote: "challenger", Rationale: sealedRationale}, Salt: salt(0)})
		wantCode(t, err, dotlab.EINVALID)
		_, err = w.p.RevealVote(ctx, w.reviewers[0], w.id, dotlab.RevealBody{VoteBody: dotlab.VoteBody{Vote: "runner", Rationale: sealedRationale}, Salt: salt(9)})
		wantCode(t, err, dotlab.EINVALID)
		for i := 0; i < 2; i++ {
			if _, err := w.p.RevealVote(ctx, w.reviewers[i], w.id, dotlab.RevealBody{VoteBody: dotlab.VoteBody{Vote: sides[i], Rationale: sealedRationale}, Salt: salt(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if d, _ := w.db.FindDispute(ctx, w.id); len(d.Votes) != 0 || w.state(w.id).State != dotlab.StateDisputed {
			t.Fatalf("revealed votes shown before the decision: %+v", d.Votes)
		}
		w.clock.Advance(11 * time.Second)
		w.settle()
		c := w.state(w.id)
		if c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeNotReproduced {
			t.Fatalf("after the reveal deadline: %s %s", c.State, c.Outcome)
		}
		d, _ := w.db.FindDispute(ctx, w.id)
		if len(d.Votes) != 2 {
			t.Fatalf("decided votes: %+v", d.Votes)
		}
		for i, want := range []float64{dotlab.WeightVoteMajority, dotlab.WeightVoteMajority, dotlab.WeightAbstained} {
			if p, _ := w.db.FindAgent(ctx, w.reviewers[i].ID); p.Standing != want {
				t.Errorf("reviewer %d standing %v, want %v", i, p.Standing, want)
			}
		}
		_, err = w.p.RevealVote(ctx, w.reviewers[2], w.id, dotlab.RevealBody{VoteBody: dotlab.VoteBody{Vote: sides[2], Rationale: sealedRationale}, Salt: salt(2)})
		wantCode(t, err, dotlab.EWINDOWCLOSED)
	})
}

// TestSealedCommitDeadline: seats that have not committed by the commit
// deadline abstain and free their seats; the round waits for a full
// committee, so no dispute is decided by fewer commitments than the
// quorum, and the old seats cannot vote.
func TestSealedCommitDeadline(t *testing.T) {
	forEachSealedWorld(t, func(t *testing.T, w *sealedWorld) {
		ctx := context.Background()
		w.draw(0)
		w.draw(1)
		w.clock.Advance(11 * time.Second)
		w.settle()
		_, err := w.p.CastVote(ctx, w.reviewers[0], w.id, dotlab.VoteBody{Vote: "runner", Rationale: sealedRationale})
		wantCode(t, err, dotlab.EWINDOWCLOSED)
		d := w.draw(2)
		if d.Sealed == nil || d.Sealed.Round != 1 || len(d.Sealed.Votes) != 3 {
			t.Fatalf("after the deadline: %+v", d.Sealed)
		}
		// One commitment, then the deadline again: one commitment of three
		// decides nothing.
		if _, err := w.p.CastVote(ctx, w.reviewers[2], w.id, dotlab.VoteBody{Vote: "challenger", Rationale: sealedRationale}); err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(11 * time.Second)
		w.settle()
		if c := w.state(w.id); c.State != dotlab.StateDisputed {
			t.Fatalf("decided by one commitment of three: %s %s", c.State, c.Outcome)
		}
		for i, side := range []string{"challenger", "runner"} {
			w.draw(3 + i)
			if _, err := w.p.CastVote(ctx, w.reviewers[3+i], w.id, dotlab.VoteBody{Vote: side, Rationale: sealedRationale}); err != nil {
				t.Fatal(err)
			}
		}
		if c := w.state(w.id); c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeReproduced {
			t.Fatalf("after a full committee: %s %s", c.State, c.Outcome)
		}
		for i, want := range []float64{dotlab.WeightAbstained, dotlab.WeightAbstained, dotlab.WeightVoteMajority, dotlab.WeightVoteMajority, dotlab.WeightVoteAgainst} {
			if p, _ := w.db.FindAgent(ctx, w.reviewers[i].ID); p.Standing != want {
				t.Errorf("reviewer %d standing %v, want %v", i, p.Standing, want)
			}
		}
	})
}

// TestOpenVotesHaveNoCommitStep: the default mode keeps the skill text's
// votes; the sealed steps are not there.
func TestOpenVotesHaveNoCommitStep(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		rev := mustAgent(t, w.db, "reviewer")
		_, err := sqlstoretest.Protocol(w.db).CommitVote(context.Background(), rev, "DL-0001", dotlab.CommitBody{Commitment: strings.Repeat("a", 64)})
		wantCode(t, err, dotlab.ENOSUCHROUTE)
		_, err = sqlstoretest.Protocol(w.db).RevealVote(context.Background(), rev, "DL-0001", dotlab.RevealBody{})
		wantCode(t, err, dotlab.ENOSUCHROUTE)
	})
}
