package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

const claimColumns = `id, title, field, submitter_id, state, manifest_hash, runner_id, offer_expires_at,
	publish_deadline, run_id, challenge_deadline, outcome, settled_at, created_at`

type rowScanner interface{ Scan(...any) error }

func (db *DB) scanClaim(row rowScanner) (*dotlab.Claim, error) {
	c, err := scanClaimShort(row)
	if err != nil {
		return nil, err
	}
	m, err := db.parsedManifest(c.ManifestHash)
	if err != nil {
		return nil, err
	}
	c.Manifest = m
	return c, nil
}

// scanClaimShort scans a row of claimColumns without the manifest (as
// listings show claims).
func scanClaimShort(row rowScanner) (*dotlab.Claim, error) {
	var c dotlab.Claim
	var runner, runID, outcome sql.NullString
	var offer, publish, challenge, settled sql.NullInt64
	var created int64
	if err := row.Scan(&c.ID, &c.Title, &c.Field, &c.SubmitterID, &c.State, &c.ManifestHash, &runner, &offer,
		&publish, &runID, &challenge, &outcome, &settled, &created); err != nil {
		return nil, err
	}
	c.RunnerID, c.RunID, c.Outcome = runner.String, runID.String, dotlab.Outcome(outcome.String)
	c.OfferExpiresAt, c.PublishDeadline = fromNullMS(offer), fromNullMS(publish)
	c.ChallengeDeadline, c.SettledAt = fromNullMS(challenge), fromNullMS(settled)
	c.CreatedAt = fromMS(created)
	return &c, nil
}

// maxCachedManifestBytes bounds the parsed-manifest cache by the size of the
// manifests' text (the parsed form is of the same order).
const maxCachedManifestBytes = 32 << 20

// parsedManifest returns a listed manifest by its canonical hash, decoding
// the stored (already validated) text only on a cache miss: manifests never
// change once listed, so the text is read once per process.
func (db *DB) parsedManifest(hash string) (*dotlab.Manifest, error) {
	if m, ok := db.manifests.Get(hash); ok {
		return m, nil
	}
	var raw string
	if err := db.r.QueryRowContext(context.Background(), `SELECT manifest_raw FROM claims WHERE manifest_hash = $1`, hash).Scan(&raw); err != nil {
		return nil, err
	}
	m := new(dotlab.Manifest)
	if err := json.Unmarshal([]byte(raw), m); err != nil {
		return nil, err
	}
	db.manifests.Put(hash, m, len(raw))
	return m, nil
}

// ClaimByManifest is the id of the claim listed with the manifest whose
// canonical hash is hash; found is false when there is none (store.Reader).
func (db *DB) ClaimByManifest(ctx context.Context, hash string) (string, bool, error) {
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT id FROM claims WHERE manifest_hash = $1`, hash).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

// AddClaim lists a claim (store.ClaimWrite): the next claim number, the
// row, the submitter's role, the history and w.Entries' log entries, in one
// transaction. A manifest listed meanwhile is EDUPLICATE.
func (db *DB) AddClaim(ctx context.Context, w store.ClaimWrite) (string, error) {
	nc, t := w.Claim, w.Transition
	requires := nc.Manifest.Requires
	if requires == nil {
		requires = []string{}
	}
	reqJSON, _ := json.Marshal(requires)
	var id string
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var n int64
		if err := tx.QueryRowContext(ctx, `UPDATE counters SET value = value + 1 WHERE name = 'claim' RETURNING value`).Scan(&n); err != nil {
			return err
		}
		id = dotlab.FormatClaimID(n)
		if _, err := tx.ExecContext(ctx, `INSERT INTO claims (id, number, title, field, submitter_id, state, manifest_hash,
			manifest_raw, requires, draw_key, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
			id, n, nc.Manifest.Title, nc.Field, w.SubmitterID, t.To, nc.ManifestHash,
			string(nc.Raw), string(reqJSON), newDrawKey(), ms(w.At)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO roles (claim_id, agent_id, role, created_at) VALUES ($1, $2, $3, $4)`,
			id, w.SubmitterID, dotlab.RoleSubmitter, ms(w.At)); err != nil {
			return err
		}
		if err := db.addHistory(ctx, tx, id, t, w.At, w.History...); err != nil {
			return err
		}
		return db.appendLog(ctx, tx, w.Entries(id))
	})
	if isUniqueViolation(err) {
		return "", errListedMeanwhile
	}
	return id, err
}

// errListedMeanwhile is a unique violation of the manifest hash.
var errListedMeanwhile = dotlab.Errorf(dotlab.EDUPLICATE, "this manifest was listed while you submitted it: submit it again to learn the claim's id")

// newDrawKey returns a uniform random position in [0, 2^62) for the draw.
func newDrawKey() int64 { return rand.Int64N(dotlab.DrawKeys) }

// addEvent appends a state change to a claim's history.
func addEvent(ctx context.Context, tx *sql.Tx, claimID string, state dotlab.ClaimState, at time.Time, detail string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO claim_events (claim_id, seq, state, at, detail)
		VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM claim_events WHERE claim_id = $1), $2, $3, $4)`,
		claimID, state, ms(at), detail)
	return err
}

// FindClaim returns the claim or ENOTFOUND.
func (db *DB) FindClaim(ctx context.Context, id string) (*dotlab.Claim, error) {
	return db.findClaim(ctx, db.r, id)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (db *DB) findClaim(ctx context.Context, q querier, id string) (*dotlab.Claim, error) {
	var row *sql.Row
	if q == querier(db.r) && db.findClaimStmt != nil {
		row = db.findClaimStmt.QueryRowContext(ctx, id)
	} else {
		row = q.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1`, id)
	}
	c, err := db.scanClaim(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.NoClaim(id)
	}
	return c, err
}

// FindClaims returns a page of claims in id order, optionally by state.
func (db *DB) FindClaims(ctx context.Context, p dotlab.Page) ([]*dotlab.Claim, error) {
	f, after, err := p.Check("state")
	if err != nil {
		return nil, err
	}
	var rows *sql.Rows
	if f.State != "" {
		rows, err = db.r.QueryContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE state = $1 AND number > $2 ORDER BY number LIMIT $3`, f.State, after, f.Limit)
	} else {
		rows, err = db.r.QueryContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE number > $1 ORDER BY number LIMIT $2`, after, f.Limit)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*dotlab.Claim{}
	for rows.Next() {
		c, err := db.scanClaim(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func claimNumber(id string) int64 { return dotlab.ClaimNumber(id) }

// ClaimManifest returns the manifest exactly as submitted.
func (db *DB) ClaimManifest(ctx context.Context, id string) ([]byte, error) {
	var raw string
	err := db.r.QueryRowContext(ctx, `SELECT manifest_raw FROM claims WHERE id = $1`, id).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.NoClaim(id)
	}
	return []byte(raw), err
}

// roleOf returns the caller's role on a claim, or "" when it holds none.
// RoleOf is agentID's role on claimID, "" for none (store.Reader).
func (db *DB) RoleOf(ctx context.Context, claimID, agentID string) (string, error) {
	return db.roleOf(ctx, db.r, claimID, agentID)
}

func (db *DB) roleOf(ctx context.Context, q querier, claimID, agentID string) (string, error) {
	var role string
	err := q.QueryRowContext(ctx, `SELECT role FROM roles WHERE claim_id = $1 AND agent_id = $2`, claimID, agentID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return role, err
}

// ClaimEvents returns a claim's state changes after seq, in order.
func (db *DB) ClaimEvents(ctx context.Context, claimID string, after int64) ([]dotlab.ClaimEvent, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT seq, state, at, detail FROM claim_events WHERE claim_id = $1 AND seq > $2 ORDER BY seq`, claimID, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dotlab.ClaimEvent{}
	for rows.Next() {
		var e dotlab.ClaimEvent
		var at int64
		if err := rows.Scan(&e.Seq, &e.State, &at, &e.Detail); err != nil {
			return nil, err
		}
		e.ClaimID, e.At = claimID, fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
