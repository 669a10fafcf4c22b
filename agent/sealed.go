package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
)

// Sealed votes, the reviewer's side (docs/mechanism.md §4a): CommitVote
// commits to a vote under a salt drawn here and keeps what the reveal needs
// in a file of its own, so nobody, the server's operator included, reads
// the vote before it is revealed; RevealVotes reveals every kept vote whose
// round is in its reveal phase.

// sealedVote is what a commitment needs at its reveal, kept in
// SealedPath's directory (mode 0600) from before the commit is sent until
// the vote is revealed or its round has passed.
type sealedVote struct {
	Server     string `json:"server"`
	DisputeID  string `json:"dispute_id"`
	ReviewerID string `json:"reviewer_id"`
	Vote       string `json:"vote"`
	Rationale  string `json:"rationale"`
	Salt       string `json:"salt"`
	Commitment string `json:"commitment"`
}

// SealedPath is the directory of the votes this machine committed to on
// server and has not yet revealed: <config dir>/sealed/<server, escaped>.
func SealedPath(server string) (string, error) {
	dir, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "sealed", url.PathEscape(strings.TrimRight(server, "/"))), nil
}

// CommitVote commits to vote and rationale on dispute disputeID (POST
// /disputes/{id}/commit) under a fresh 32-byte salt, keeping the vote for
// RevealVotes first: a commitment whose salt were lost could never be
// revealed, and would count as an abstention.
func (a *Agent) CommitVote(ctx context.Context, disputeID, vote, rationale string) (*dotlab.Dispute, error) {
	if err := a.whoami(ctx); err != nil {
		return nil, err
	}
	// The server cannot read a commitment, so it cannot refuse a vote its
	// reveal would fail: check here what the reveal will be checked for.
	if err := (dotlab.VoteBody{Vote: vote, Rationale: rationale}).Validate(); err != nil {
		return nil, err
	}
	d, err := a.Client.Dispute(ctx, disputeID)
	if err != nil {
		return nil, err
	}
	if d.Claim != nil && d.Claim.Manifest != nil {
		if err := dotlab.CheckRationaleTargets(rationale, d.Claim.Manifest.TargetNames()); err != nil {
			return nil, err
		}
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	sv := sealedVote{Server: a.Client.Server(), DisputeID: disputeID, ReviewerID: a.self, Vote: vote, Rationale: strings.TrimSpace(rationale), Salt: hex.EncodeToString(salt)}
	sv.Commitment = dotlab.VoteCommitment(disputeID, a.self, sv.Vote, sv.Rationale, sv.Salt)
	path, err := a.sealedFile(disputeID)
	if err != nil {
		return nil, err
	}
	if err := writeSealed(path, sv); err != nil {
		return nil, err
	}
	d, err = a.Client.CommitVote(ctx, disputeID, dotlab.CommitBody{Commitment: sv.Commitment, DisputeID: disputeID})
	var refused *dotlab.Error
	if errors.As(err, &refused) {
		os.Remove(path) // the server took no commitment: nothing to reveal
	}
	return d, err
}

// RevealVotes reveals each vote this agent committed to on its server
// whose round is in its reveal phase (POST /disputes/{id}/reveal, signed
// when the agent has a key), and forgets those revealed or past revealing.
// It returns the disputes revealed.
func (a *Agent) RevealVotes(ctx context.Context) ([]*dotlab.Dispute, error) {
	if err := a.whoami(ctx); err != nil {
		return nil, err
	}
	dir, err := SealedPath(a.Client.Server())
	if err != nil {
		return nil, err
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*-"+a.self+".json"))
	var out []*dotlab.Dispute
	for _, path := range paths {
		d, done, err := a.revealOne(ctx, path)
		if err != nil {
			return out, err
		}
		if done {
			os.Remove(path)
		}
		if d != nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// revealOne reveals the vote kept at path if its round is in its reveal
// phase; done says the file is no longer needed.
func (a *Agent) revealOne(ctx context.Context, path string) (*dotlab.Dispute, bool, error) {
	var sv sealedVote
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &sv)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	cur, err := a.Client.Dispute(ctx, sv.DisputeID)
	if err != nil {
		return nil, false, err
	}
	if cur.Sealed == nil {
		return nil, true, nil // decided
	}
	if cur.Sealed.Phase != dotlab.PhaseReveal {
		return nil, false, nil
	}
	var b dotlab.RevealBody
	d, _, err := postSigned(a, "revealing", sv.DisputeID, func(k *attest.Key) {
		b = dotlab.RevealBody{VoteBody: a.voteBody(ctx, k, sv.DisputeID, sv.Vote, sv.Rationale), Salt: sv.Salt}
	}, func() (*dotlab.Dispute, error) { return a.Client.RevealVote(ctx, sv.DisputeID, b) })
	if code := dotlab.ErrorCode(err); code == dotlab.EWINDOWCLOSED || code == dotlab.ECONFLICT {
		a.logf("%s: not revealed: %v", sv.DisputeID, err)
		return nil, code == dotlab.EWINDOWCLOSED, nil
	}
	return d, err == nil, err
}

// sealedFile is where the vote on disputeID is kept.
func (a *Agent) sealedFile(disputeID string) (string, error) {
	dir, err := SealedPath(a.Client.Server())
	if err != nil {
		return "", err
	}
	if !dotlab.ValidClaimID(disputeID) {
		return "", fmt.Errorf("dispute id %q: not a claim id (DL-0001)", disputeID)
	}
	return filepath.Join(dir, disputeID+"-"+a.self+".json"), nil
}

// writeSealed writes sv to path (mode 0600, its directory 0700) through a
// temporary file, so a crash leaves the old file or the new one.
func writeSealed(path string, sv sealedVote) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(sv, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// RevealAndReport is `dotlab review --reveal`: RevealVotes, saying on w
// which votes were revealed.
func (a *Agent) RevealAndReport(ctx context.Context, w io.Writer) error {
	ds, err := a.RevealVotes(ctx)
	for _, d := range ds {
		fmt.Fprintf(w, "revealed your vote on %s (claim %s)\n", d.ID, strings.TrimSpace(string(d.Claim.State)+" "+string(d.Claim.Outcome)))
	}
	if err == nil && len(ds) == 0 {
		fmt.Fprintln(w, "no committed vote is ready to reveal (rounds still committing, or none kept)")
	}
	return err
}

// ShowVoted says on w what the vote of rv did: under sealed votes, that it
// is sealed (committed, when commit); else the votes in and the claim.
func ShowVoted(w io.Writer, rv *Reviewed, commit bool) {
	res := rv.Result
	if res.Sealed != nil {
		verb := "voted (sealed by the server)"
		if commit {
			verb = "committed to"
		}
		fmt.Fprintf(w, "%s %s on %s (round %d, %s phase; votes stay sealed until decided)\n", verb, rv.Decision.Vote, rv.Dispute.ID, res.Sealed.Round, res.Sealed.Phase)
		return
	}
	fmt.Fprintf(w, "voted %s on %s (%d of %d votes in; claim %s %s)\n", rv.Decision.Vote, rv.Dispute.ID, len(res.Votes), res.Quorum, res.Claim.State, res.Claim.Outcome)
}
