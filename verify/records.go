package verify

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/tlogfmt"
)

// records are a claim's records as the API serves them.
type records struct {
	claim      *apiv1.ClaimView
	manifest   []byte // as submitted
	run        *dotlab.Run
	challenges []*dotlab.Challenge
	votes      []dotlab.Vote
	messages   []dotlab.LabMessage
}

// fetchRecords reads every record of claim id: the claim and its manifest,
// the official run, the challenges, the dispute's votes and the lab room's
// messages.
func fetchRecords(ctx context.Context, c *client.Client, id string) (*records, error) {
	var rs records
	var err error
	if rs.claim, err = c.Claim(ctx, id); err != nil {
		return nil, err
	}
	if rs.manifest, err = c.ClaimManifest(ctx, id); err != nil {
		return nil, err
	}
	if rs.claim.RunID != "" {
		if rs.run, err = c.Run(ctx, rs.claim.RunID); err != nil {
			return nil, err
		}
	}
	if rs.challenges, err = c.Challenges(ctx, id); err != nil {
		return nil, err
	}
	if dotlab.FirstDisagreeing(rs.challenges) != nil {
		d, err := c.Dispute(ctx, id)
		if err != nil {
			return nil, err
		}
		rs.votes = d.Votes
	}
	after := ""
	for {
		p, err := c.Messages(ctx, id, after, 200)
		if err != nil {
			return nil, err
		}
		rs.messages = append(rs.messages, p.Messages...)
		if p.Next == "" || len(p.Messages) == 0 {
			break
		}
		after = p.Next
	}
	return &rs, nil
}

// expected is one entry a record must have in the log.
type expected struct {
	label string // "run r_abc", for the report
	entry tlogfmt.Entry
}

// expectations are the entries the records must have, in log order of
// their kinds.
func (rs *records) expectations() []expected {
	var out []expected
	add := func(label string, e tlogfmt.Entry) { out = append(out, expected{label, e}) }
	add("claim "+rs.claim.ID+" listing", tlogfmt.ClaimEntry(rs.claim.Claim))
	if rs.run != nil {
		add("run "+rs.run.ID, tlogfmt.RunEntry(rs.run))
		if env := rs.run.Body.Envelope; env != nil {
			add("signature of run "+rs.run.ID, tlogfmt.EnvelopeEntry(tlogfmt.TypeRun, rs.claim.ID, rs.run.ID, env))
		}
	}
	for _, ch := range rs.challenges {
		add("challenge "+ch.ID, tlogfmt.ChallengeEntry(ch))
		if ch.Envelope != nil {
			add("signature of challenge "+ch.ID, tlogfmt.EnvelopeEntry(tlogfmt.TypeChallenge, rs.claim.ID, ch.ID, ch.Envelope))
		}
	}
	for i := range rs.votes {
		v := &rs.votes[i]
		add("vote of "+v.ReviewerID, tlogfmt.VoteEntry(v))
		if v.Envelope != nil {
			add("signature of the vote of "+v.ReviewerID, tlogfmt.EnvelopeEntry(tlogfmt.TypeVote, rs.claim.ID, tlogfmt.VoteID(rs.claim.ID, v.ReviewerID), v.Envelope))
		}
	}
	if rs.claim.State == dotlab.StateSettled {
		add("settlement of "+rs.claim.ID, tlogfmt.SettlementEntry(rs.claim.Claim))
	}
	for i := range rs.messages {
		m := &rs.messages[i]
		add(fmt.Sprintf("lab message %s (#%d)", m.ID, m.Seq), tlogfmt.MessageEntry(m))
	}
	return out
}
