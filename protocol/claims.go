package protocol

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
)

var _ dotlab.ClaimService = (*Service)(nil)

// ValidateField checks the field of science given with a claim.
func ValidateField(field string) error {
	if l := utf8.RuneCountInString(strings.TrimSpace(field)); l < 1 || l > 100 {
		return dotlab.Errorf(dotlab.EINVALID, "$.field: must be 1-100 characters, e.g. \"statistics\" or \"physics\"")
	}
	return nil
}

// CreateClaim is the list step (docs/protocol.md §3, dotlab.EventList) of
// a manifest the edge has parsed and held to the listing rules (nc). In
// order: the field; a manifest not listed already (EDUPLICATE, naming the
// claim); the secret screen of the manifest text and the field. Bounties
// are not live, so the claim is funded at once (minimum bounty 0): its
// history records listed, then funded. The submitter takes the submitter
// role, so it is never offered its own claim; the listing is logged.
func (s *Service) CreateClaim(ctx context.Context, submitterID string, nc dotlab.NewClaim) (*dotlab.Claim, error) {
	if err := ValidateField(nc.Field); err != nil {
		return nil, err
	}
	if nc.Manifest == nil || nc.ManifestHash == "" {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.manifest: required")
	}
	existing, found, err := s.Store.ClaimByManifest(ctx, nc.ManifestHash)
	if err != nil {
		return nil, err
	}
	if found {
		return nil, dotlab.Errorf(dotlab.EDUPLICATE, "this manifest (canonical SHA-256 %s) is already listed as %s: use that claim (%s)", nc.ManifestHash, existing, dotlab.Go(dotlab.StepClaim, existing))
	}
	if err := s.screenText(map[string]string{"$.manifest": string(nc.Raw), "$.field": nc.Field}); err != nil {
		return nil, err
	}
	t, err := dotlab.Next("", dotlab.EventList)
	if err != nil {
		return nil, err
	}
	nc.Field = strings.TrimSpace(nc.Field)
	at := s.now()
	id, err := s.Store.AddClaim(ctx, store.ClaimWrite{Write: store.Write{At: at}, Claim: nc, SubmitterID: submitterID, Transition: t,
		History: []string{"listed", "funded at once: bounties are not live (minimum bounty 0)"},
		Entries: func(id string) []tlogfmt.Entry {
			return []tlogfmt.Entry{tlogfmt.ClaimEntry(&dotlab.Claim{ID: id, Title: nc.Manifest.Title, Field: nc.Field, SubmitterID: submitterID,
				ManifestHash: nc.ManifestHash, CreatedAt: at})}
		}})
	if dotlab.ErrorCode(err) == dotlab.EDUPLICATE {
		return nil, dotlab.Errorf(dotlab.EDUPLICATE, "this manifest (canonical SHA-256 %s) was listed while you submitted it: submit it again to learn the claim's id", nc.ManifestHash)
	}
	if err != nil {
		return nil, err
	}
	return s.findClaim(ctx, id)
}
