package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// AddOutputListing stores an agent's output listing (store.OutputListingWrite):
// inserted, or replacing its earlier upload while no record pins that one;
// applied is false when a record pins it already.
func (db *DB) AddOutputListing(ctx context.Context, w store.OutputListingWrite) (bool, error) {
	applied := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO output_listings (claim_id, agent_id, sha256, entries, bytes, listing, uploaded_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (claim_id, agent_id) DO UPDATE SET sha256 = excluded.sha256, entries = excluded.entries,
				bytes = excluded.bytes, listing = excluded.listing, uploaded_at = excluded.uploaded_at
			WHERE output_listings.record_id IS NULL`,
			w.ClaimID, w.AgentID, w.Pin.SHA256, w.Pin.Count, w.Pin.Bytes, string(w.Listing), ms(w.At))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		applied = true
		return db.appendLog(ctx, tx, w.Log)
	})
	return applied, err
}

// UploadedOutputListing is agentID's output listing on claimID (with its
// bytes when withListing); found is false when none was uploaded.
func (db *DB) UploadedOutputListing(ctx context.Context, claimID, agentID string, withListing bool) (store.StoredOutputListing, bool, error) {
	var l store.StoredOutputListing
	var listing string
	col := "''"
	if withListing {
		col = "listing"
	}
	err := db.r.QueryRowContext(ctx, `SELECT sha256, entries, bytes, `+col+`, COALESCE(record_id, '') FROM output_listings
		WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID).Scan(&l.Pin.SHA256, &l.Pin.Count, &l.Pin.Bytes, &listing, &l.RecordID)
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	if err != nil {
		return l, false, err
	}
	l.Listing = []byte(listing)
	return l, true, nil
}

// UnpinnedOutputListings counts agentID's output listings no record pins.
func (db *DB) UnpinnedOutputListings(ctx context.Context, agentID string) (int, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM output_listings WHERE agent_id = $1 AND record_id IS NULL`, agentID).Scan(&n)
	return n, err
}

// OutputListing is the output listing pinned by run or challenge recordID,
// or ENOTFOUND (none pinned, or no such record).
func (db *DB) OutputListing(ctx context.Context, recordID string) ([]byte, error) {
	var listing string
	err := db.r.QueryRowContext(ctx, `SELECT listing FROM output_listings WHERE record_id = $1`, recordID).Scan(&listing)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.Errorf(dotlab.ENOTFOUND, "%s pins no output listing: its output_hashes hold every output's hash", recordID)
	}
	return []byte(listing), err
}

// pinOutputListing pins agentID's uploaded listing with hash sum on claimID
// to recordID inside tx; ECONFLICT when it is not there unpinned (replaced
// or pinned meanwhile), so the record's transaction rolls back.
func pinOutputListing(ctx context.Context, tx *sql.Tx, claimID, agentID, sum, recordID string) error {
	if sum == "" {
		return nil
	}
	res, err := tx.ExecContext(ctx, `UPDATE output_listings SET record_id = $1
		WHERE claim_id = $2 AND agent_id = $3 AND sha256 = $4 AND record_id IS NULL`, recordID, claimID, agentID, sum)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return dotlab.Errorf(dotlab.ECONFLICT, "your output listing on %s changed while the record was written: upload it again (sha256 %s) and retry", claimID, sum)
	}
	return nil
}
