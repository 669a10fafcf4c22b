package verify

import (
	"context"
	"fmt"

	"github.com/dotlab/dotlab"
)

// checkOutputListings fetches the output listing each record of rs pins
// (the run's and each challenge's output_listing; docs/protocol.md §6
// "Output listing") and checks it against the pin: its SHA-256, entry count
// and length, its canonical form, and that the record's inline hashes are
// the listing's. The pin itself is the logged one: the record's entry, pin
// included, matched the log (matchRecords), so a listing that hashes to
// the pin is the one the log commits to.
func (v Verifier) checkOutputListings(ctx context.Context, rep *Report, rs *records, only func(string) bool) {
	if rs.run != nil && only(rs.run.ID) {
		v.checkOutputListing(ctx, rep, "run "+rs.run.ID, rs.run.ID, rs.run.Body.OutputListing, rs.run.Body.OutputHashes)
	}
	for _, ch := range rs.challenges {
		if only(ch.ID) {
			v.checkOutputListing(ctx, rep, "challenge "+ch.ID, ch.ID, ch.OutputListing, ch.OutputHashes)
		}
	}
}

func (v Verifier) checkOutputListing(ctx context.Context, rep *Report, name, id string, pin *dotlab.OutputListing, inline map[string]string) {
	if pin == nil {
		return
	}
	data, err := v.Client.OutputListing(ctx, id)
	if err != nil {
		rep.fail("%s: its output listing cannot be read: %v", name, err)
		return
	}
	hashes, err := dotlab.ParseOutputListing(data)
	if err != nil {
		rep.fail("%s: the served output listing: %v", name, err)
		return
	}
	if got := dotlab.PinOutputListing(data, len(hashes)); got != *pin {
		rep.fail("%s: the served output listing is sha256 %s, %d entries, %d bytes; the record and its log entry pin sha256 %s, %d entries, %d bytes",
			name, got.SHA256, got.Count, got.Bytes, pin.SHA256, pin.Count, pin.Bytes)
		return
	}
	if err := dotlab.CheckListingAgrees(inline, hashes); err != nil {
		rep.fail("%s: %s", name, fmt.Sprint(dotlab.ErrorLines(err)))
		return
	}
	rep.ok("%s: output listing (%d entries, %d bytes) hashes to the output_listing its record and log entry pin", name, pin.Count, pin.Bytes)
}
