package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/verify"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NextDisputeOutput is next_dispute's answer: a dispute, or none (204).
type NextDisputeOutput struct {
	None    bool         `json:"none" jsonschema:"true when no dispute is open for you"`
	Dispute *DisputeView `json:"dispute,omitempty"`
}

// VoteInput is the vote tool's input.
type VoteInput struct {
	DisputeID string `json:"dispute_id" jsonschema:"the dispute id (the claim id, e.g. DL-0004)"`
	Vote      string `json:"vote" jsonschema:"runner or challenger"`
	Rationale string `json:"rationale" jsonschema:"20 to 2000 characters tied to specific comparisons: name at least one target"`
}

// VoteOutput is the dispute after the vote.
type VoteOutput struct {
	DisputeID    string `json:"dispute_id"`
	Vote         string `json:"vote"`
	VotesIn      int    `json:"votes_in"`
	Quorum       int    `json:"quorum"`
	ClaimState   string `json:"claim_state"`
	ClaimOutcome string `json:"claim_outcome,omitempty" jsonschema:"the final outcome once the majority decided"`
}

// VerifyInput names what to verify.
type VerifyInput struct {
	Target string `json:"target" jsonschema:"a claim id (DL-0001) or a run id (run_…)"`
}

// VerifyOutput is a verification report (docs/verification.md).
type VerifyOutput struct {
	Subject        string      `json:"subject"`
	Passed         bool        `json:"passed"`
	CheckpointOrig string      `json:"checkpoint_origin"`
	CheckpointSize int64       `json:"checkpoint_size"`
	Passes         int         `json:"checks_passed"`
	Failures       []Untrusted `json:"failures" jsonschema:"each failed check, naming its record (may quote served records)"`
}

func (s *service) addReviewTools(srv *mcp.Server) {
	add(srv, "next_dispute", "Draw the next dispute", "Reviewer step 1 (GET /disputes/next): a disputed claim you hold no role on, with the run, the challenges side by side per target, and the votes so far. none=true: nothing open. Read the evidence; rerun (purpose review) only if needed to decide."+untrustedNote, false, s.nextDispute)
	add(srv, "vote", "Vote on a dispute", "Reviewer step 3 (POST /disputes/{id}/vote): runner or challenger, with a rationale of 20-2000 characters tied to specific comparisons (name a target). Vote on evidence only. The rationale is screened for keys before it is posted.", false, s.vote)
	add(srv, "verify", "Verify against the transparency log", "`dotlab verify` (docs/verification.md): checks a claim's or a run's records against the server's signed transparency log (the checkpoint, its consistency with the last one this machine saw, every inclusion proof, the comparisons recomputed).", true, s.verify)
}

func (s *service) nextDispute(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (NextDisputeOutput, error) {
	d, err := s.agent.Client.NextDispute(ctx)
	if errors.Is(err, client.ErrNone) {
		return NextDisputeOutput{None: true}, nil
	} else if err != nil {
		return NextDisputeOutput{}, err
	}
	v := disputeView(s.server, d)
	return NextDisputeOutput{Dispute: &v}, nil
}

func (s *service) vote(ctx context.Context, _ *mcp.CallToolRequest, in VoteInput) (VoteOutput, error) {
	if err := claimID(in.DisputeID); err != nil {
		return VoteOutput{}, err
	}
	if in.Vote != dotlab.VoteRunner && in.Vote != dotlab.VoteChallenger {
		return VoteOutput{}, toolErrorf(dotlab.EINVALID, fmt.Sprintf("vote %.20q: give runner or challenger", in.Vote))
	}
	if err := s.screen.check("rationale", in.Rationale); err != nil {
		return VoteOutput{}, err
	}
	d, err := s.agent.CastVote(ctx, in.DisputeID, in.Vote, in.Rationale)
	if err != nil {
		return VoteOutput{}, err
	}
	out := VoteOutput{DisputeID: d.ID, Vote: in.Vote, VotesIn: len(d.Votes), Quorum: d.Quorum}
	if d.Claim != nil {
		out.ClaimState, out.ClaimOutcome = string(d.Claim.State), string(d.Claim.Outcome)
	}
	return out, nil
}

func (s *service) verify(ctx context.Context, _ *mcp.CallToolRequest, in VerifyInput) (VerifyOutput, error) {
	v := verify.Verifier{Client: s.agent.Client, Witness: verify.Witness{Path: s.logsPath, Cosigning: s.cosigning}}
	check := v.Run
	if dotlab.ValidClaimID(in.Target) {
		check = v.Claim
	}
	rep, err := check(ctx, in.Target)
	if err != nil {
		return VerifyOutput{}, err
	}
	return VerifyOutput{Subject: rep.Subject, Passed: rep.Passed(), CheckpointOrig: rep.Checkpoint.Origin, CheckpointSize: rep.Checkpoint.Size,
		Passes: len(rep.OK), Failures: untrustedList(rep.Failures)}, nil
}
