package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// PutOutputListing is the upload-output-listing step (docs/protocol.md §6
// "Output listing"): the canonical listing (dotlab.EncodeOutputListing) of
// every output of the record agentID is about to post on claimID, uploaded
// before it: by the claim's runner while it may publish, or by an agent
// that may challenge the run now. Cheap checks first (the claim, who and
// its state, a listing pinned already), then the listing is parsed. An
// upload replaces the agent's earlier one until a record pins it; then the
// same bytes again answer the same pin and other bytes are refused. It
// returns the pin to put in the record's output_listing. An agent holds at
// most MaxUnpinnedOutputListings listings no record pins.
//
// Errors: ENOTFOUND (unknown claim); ENOTOFFERED (the runner's job not
// accepted); the challenge step's EWINDOWCLOSED and EROLECONFLICT;
// ECONFLICT (a record pins this agent's listing already, or it holds
// MaxUnpinnedOutputListings unpinned ones); EINVALID and
// ETOOLARGE (dotlab.ParseOutputListing).
func (s *Service) PutOutputListing(ctx context.Context, agentID, claimID string, data []byte) (*dotlab.OutputListing, error) {
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return nil, err
	}
	posted, err := s.listingRole(ctx, c, agentID)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	stored, found, err := s.Store.UploadedOutputListing(ctx, c.ID, agentID, false)
	if err != nil {
		return nil, err
	}
	if found && stored.RecordID != "" {
		if stored.Pin.SHA256 == got {
			return &stored.Pin, nil
		}
		return nil, listingPinned(c.ID, stored)
	}
	if posted {
		return nil, dotlab.Errorf(dotlab.ECONFLICT, "your record on %s is posted already, without an output listing: a listing goes before the record that pins it", c.ID)
	}
	if !found {
		if err := s.unpinnedRoom(ctx, agentID); err != nil {
			return nil, err
		}
	}
	hashes, err := dotlab.ParseOutputListing(data)
	if err != nil {
		return nil, err
	}
	pin := dotlab.PinOutputListing(data, len(hashes))
	applied, err := s.Store.AddOutputListing(ctx, store.OutputListingWrite{Write: store.Write{At: s.now()}, ClaimID: c.ID, AgentID: agentID,
		Pin: pin, Listing: data})
	if err != nil {
		return nil, err
	}
	if !applied {
		return nil, dotlab.Errorf(dotlab.ECONFLICT, "a record on %s pinned your output listing meanwhile: it is fixed", c.ID)
	}
	return &pin, nil
}

// MayPutOutputListing is PutOutputListing's cheap checks alone (the
// claim, who and its state), for the HTTP edge to run before it reads a
// listing of up to dotlab.MaxOutputListingBytes: an agent with no role on
// claimID, or a claim that does not exist, costs no read of the body.
// PutOutputListing checks them again. Errors: as PutOutputListing's
// ENOTFOUND, ENOTOFFERED, EWINDOWCLOSED and EROLECONFLICT.
func (s *Service) MayPutOutputListing(ctx context.Context, agentID, claimID string) error {
	c, err := s.findClaim(ctx, claimID)
	if err != nil {
		return err
	}
	_, err = s.listingRole(ctx, c, agentID)
	return err
}

// MaxUnpinnedOutputListings bounds the output listings one agent holds
// that no record pins (one per claim it is about to post on), so that
// uploads which never become records cannot fill the store.
const MaxUnpinnedOutputListings = 4

// unpinnedRoom refuses a new listing from agentID while it holds
// MaxUnpinnedOutputListings unpinned ones (ECONFLICT).
func (s *Service) unpinnedRoom(ctx context.Context, agentID string) error {
	n, err := s.Store.UnpinnedOutputListings(ctx, agentID)
	if err != nil {
		return err
	}
	if n >= MaxUnpinnedOutputListings {
		return dotlab.Errorf(dotlab.ECONFLICT, "you hold %d output listings that no record pins yet (at most %d): post the runs or challenges that pin them, then upload another", n, MaxUnpinnedOutputListings)
	}
	return nil
}

func listingPinned(claimID string, l store.StoredOutputListing) error {
	return dotlab.Errorf(dotlab.ECONFLICT, "your output listing on %s is pinned by %s and fixed (sha256 %s); these bytes differ", claimID, l.RecordID, l.Pin.SHA256)
}

// listingRole checks that agentID may upload an output listing on c now:
// as its runner, while the run is not published and the job may publish;
// otherwise as a challenger of the run in its window. posted is true when
// agentID's record on c exists already (its pinned listing, if any,
// decides).
func (s *Service) listingRole(ctx context.Context, c *dotlab.Claim, agentID string) (posted bool, err error) {
	now := s.now()
	if c.RunnerID == agentID && c.State != dotlab.StateFunded {
		if c.RunID != "" {
			return true, nil
		}
		return false, s.mayPublish(ctx, c, agentID, dotlab.OutcomeReproduced, now)
	}
	if c.RunnerID == agentID {
		return false, dotlab.Errorf(dotlab.ENOTOFFERED, "job %s is not accepted yet: accept it first (%s)", c.ID, dotlab.Go(dotlab.StepAccept, c.ID))
	}
	err = s.challengeable(ctx, c, agentID, dotlab.EventChallengeAgree, now)
	if dotlab.ErrorCode(err) == dotlab.ECONFLICT {
		return true, nil // challenged already
	}
	return false, err
}

// checkOutputListing checks the output listing a record body pins
// (nothing when it pins none): agentID uploaded it on claimID, no record
// pins it yet, its hash, count and bytes are the body's, and the body's
// inline hashes are the listing's. EINVALID naming $.output_listing or the
// inline hash at fault; ECONFLICT when a record pins it already.
func (s *Service) checkOutputListing(ctx context.Context, claimID, agentID string, body *dotlab.RunBody) error {
	want := body.OutputListing
	if want == nil {
		return nil
	}
	stored, found, err := s.Store.UploadedOutputListing(ctx, claimID, agentID, true)
	if err != nil {
		return err
	}
	switch {
	case !found:
		return dotlab.Errorf(dotlab.EINVALID, "$.output_listing: you uploaded no output listing on %s: upload it first (%s), then post the record pinning it", claimID, dotlab.Go(dotlab.StepUploadOutputs, claimID))
	case stored.RecordID != "":
		return listingPinned(claimID, stored)
	case stored.Pin != *want:
		return dotlab.Errorf(dotlab.EINVALID, "$.output_listing: pins sha256 %s, %d entries, %d bytes but your uploaded listing is sha256 %s, %d entries, %d bytes: pin exactly what you uploaded (%s)",
			want.SHA256, want.Count, want.Bytes, stored.Pin.SHA256, stored.Pin.Count, stored.Pin.Bytes, dotlab.Go(dotlab.StepUploadOutputs, claimID))
	}
	listed, err := dotlab.ParseOutputListing(stored.Listing)
	if err != nil {
		return err
	}
	return dotlab.CheckListingAgrees(body.OutputHashes, listed)
}
