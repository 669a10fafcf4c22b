package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/termsafe"
	"github.com/dotlab/dotlab/runner"
)

// Decision is a reviewer's vote with its rationale.
type Decision struct {
	Vote      string
	Rationale string
}

// Decider chooses a reviewer's vote on a dispute; a zero Decision casts none.
type Decider func(context.Context, *dotlab.Dispute) (Decision, error)

// Reviewed is one reviewed dispute.
type Reviewed struct {
	Dispute  *dotlab.Dispute // as drawn, with the evidence
	Decision Decision        // zero when no vote was cast
	Result   *dotlab.Dispute // the server's answer to the vote; nil when none was cast
}

// Review draws the dispute this agent is to review (GET /disputes/next,
// docs/protocol.md §4), lets decide choose the vote and casts it. With no
// dispute open it returns client.ErrNone. When decide casts no vote the
// dispute stays assigned to this agent.
func (a *Agent) Review(ctx context.Context, decide Decider) (*Reviewed, error) {
	d, err := a.Client.NextDispute(ctx)
	if err != nil {
		return nil, err
	}
	rv := &Reviewed{Dispute: d}
	if rv.Decision, err = decide(ctx, d); err != nil || rv.Decision.Vote == "" {
		return rv, err
	}
	cast := a.CastVote
	if a.Voter != nil {
		cast = a.Voter
	}
	rv.Result, err = cast(ctx, d.ID, rv.Decision.Vote, rv.Decision.Rationale)
	return rv, err
}

// ReviewOnce is the reviewer's Step: it reviews the next dispute by an
// independent rerun (DecideByRerun) and votes. It returns the claim, or ""
// when no dispute is open.
func (a *Agent) ReviewOnce(ctx context.Context) (string, error) {
	rv, err := a.Review(ctx, a.DecideByRerun)
	if errors.Is(err, client.ErrNone) {
		return "", nil
	} else if err != nil {
		if rv != nil {
			return rv.Dispute.ID, err
		}
		return "", err
	}
	a.logf("voted %s on %s", rv.Decision.Vote, rv.Dispute.ID)
	return rv.Dispute.ID, nil
}

// ShowDispute prints a dispute's evidence: the manifest's targets and, side
// by side per target, the run's and each challenge's rerun values, matches
// and the per-target differences the server computed.
func ShowDispute(w io.Writer, d *dotlab.Dispute) {
	t := termsafe.Text
	fmt.Fprintf(w, "dispute %s: %q (%s)\n", t(d.ID), d.Claim.Title, t(string(d.Claim.State)))
	fmt.Fprintf(w, "run %s by %s: %s\n", t(d.Run.ID), t(d.Run.RunnerID), t(string(d.Run.Outcome)))
	for _, ch := range d.Challenges {
		fmt.Fprintf(w, "challenge %s by %s: %s (agrees: %v)\n", t(ch.ID), t(ch.ChallengerID), t(string(ch.Outcome)), ch.Agrees)
		if ch.Notes != "" {
			fmt.Fprintf(w, "  notes: %s\n", t(ch.Notes))
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tpublished\tallowed\trun\tmatch\tchallenger\tmatch\tdelta")
	for _, ch := range d.Challenges {
		for _, df := range ch.Differences {
			pub, allowed := "", ""
			for _, c := range d.Run.Comparisons {
				if c.Name == df.Name {
					pub, allowed = string(c.Published), string(c.Allowed)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t±%s\t%s\t%v\t%s\t%v\t%s\n", t(df.Name), t(pub), t(allowed), t(string(df.Runner)), df.RunnerMatch, t(string(df.Challenger)), df.ChallengerMatch, t(string(df.Delta)))
		}
	}
	tw.Flush()
	if se := d.Sealed; se != nil {
		committed := 0
		for _, v := range se.Votes {
			if v.CommittedAt != nil {
				committed++
			}
		}
		fmt.Fprintf(w, "votes sealed until decided: round %d, %s phase, %d of %d seats committed (commit deadline %s)\n",
			se.Round, t(se.Phase), committed, d.Quorum, se.CommitDeadline.Format(time.RFC3339))
		return
	}
	fmt.Fprintf(w, "votes so far: %d of %d\n", len(d.Votes), d.Quorum)
	for _, v := range d.Votes {
		fmt.Fprintf(w, "  %s: %s — %s\n", t(v.ReviewerID), t(string(v.Vote)), t(v.Rationale))
	}
}

// DecideByRerun reruns the disputed manifest and sides with whoever's
// outcome the reviewer's own rerun reproduces, citing the comparisons.
func (a *Agent) DecideByRerun(ctx context.Context, d *dotlab.Dispute) (Decision, error) {
	m, err := a.fetchManifest(ctx, d.ID)
	if err != nil {
		return Decision{}, err
	}
	rec, err := a.Engine.Rerun(runner.WithInputArchive(ctx, a.Client.InputArchive(d.ID)), m, a.workDir("review", d.ID))
	if err != nil {
		return Decision{}, fmt.Errorf("%s: rerun: %w", d.ID, err)
	}
	var cites []string
	for _, c := range rec.Comparisons {
		cites = append(cites, fmt.Sprintf("%s = %s (published %s, %s)", c.Name, c.Rerun, c.Published, within(c.Match)))
	}
	sort.Strings(cites)
	if len(cites) == 0 {
		// No comparisons (spec_issue, input_mismatch): still name the
		// targets, as a rationale must (dotlab.CheckRationaleTargets).
		cites = append(cites, "none of the targets ("+strings.Join(m.TargetNames(), ", ")+") could be compared")
	}
	evidence := fmt.Sprintf("My independent rerun gives %s: %s.", rec.Body.Outcome, strings.Join(cites, "; "))
	switch side, ch := sideOf(d, rec.Body.Outcome); side {
	case dotlab.VoteRunner:
		return Decision{Vote: dotlab.VoteRunner, Rationale: evidence + " This matches the official run."}, nil
	case dotlab.VoteChallenger:
		return Decision{Vote: dotlab.VoteChallenger, Rationale: evidence + " This matches the challenge " + ch.ID + ", not the run."}, nil
	}
	return Decision{}, fmt.Errorf("%s: my rerun (%s) matches neither the run (%s) nor a challenge: vote by hand with --vote and --rationale", d.ID, rec.Body.Outcome, d.Run.Outcome)
}

// sideOf is the side a reviewer whose own rerun gave got votes for: the
// runner's when got agrees with the run; the challenger's when it agrees
// with the first disagreeing challenge, whose outcome that side settles
// with (docs/mechanism.md §4), not with any later challenge; "" otherwise.
func sideOf(d *dotlab.Dispute, got dotlab.Outcome) (string, *dotlab.Challenge) {
	if dotlab.Agrees(d.Run.Outcome, got) {
		return dotlab.VoteRunner, nil
	}
	if ch := dotlab.FirstDisagreeing(d.Challenges); ch != nil && dotlab.Agrees(ch.Outcome, got) {
		return dotlab.VoteChallenger, ch
	}
	return "", nil
}
