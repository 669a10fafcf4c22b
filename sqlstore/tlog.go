package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
)

// Every protocol record is logged in the transaction that writes it
// (docs/verification.md "Entries"): the entry is built from the record as
// the read path returns it (read back inside the transaction where the
// stored form differs from the written one), so that a verifier rebuilding
// the entry from the API gets the same bytes. The entry is written pending
// (translog.Append: no lock shared with other writers); after the commit
// the write waits, at most logAwait, for the log's sequencer to integrate
// it (db.tx), so that what a client reads after a write's answer is in the
// log's checkpoint, as before the sequencer.

// Log is the store's transparency log, or nil when logging is off
// (Options.NoLog).
func (db *DB) Log() *translog.Log { return db.log }

func (db *DB) openLog(ctx context.Context, opt Options) error {
	if opt.NoLog {
		return nil
	}
	l, err := translog.Open(ctx, db.w, db.r, string(db.dialect), translog.Options{Origin: opt.LogOrigin})
	if err != nil {
		return err
	}
	db.log = l
	return nil
}

// logEntry appends e in tx (nothing when logging is off).
func (db *DB) logEntry(ctx context.Context, tx *sql.Tx, e tlogfmt.Entry) error {
	if db.log == nil {
		return nil
	}
	if err := db.log.Append(ctx, tx, e); err != nil {
		return err
	}
	db.logTx.Store(tx, true)
	return nil
}

// logAwait bounds how long a write waits after its commit for its entries'
// integration under Options.AwaitLog; the record is committed either way,
// and a later batch (of any process) integrates what is left.
const logAwait = 2 * time.Second

// committedLog wakes the sequencer for what tx logged, if it logged, and
// under Options.AwaitLog waits for its integration.
func (db *DB) committedLog(ctx context.Context, tx *sql.Tx) {
	if _, logged := db.logTx.LoadAndDelete(tx); !logged {
		return
	}
	if !db.awaitsLog {
		db.log.Committed()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, logAwait)
	defer cancel()
	db.log.Await(ctx)
}

// logClaim logs claim c's listing (the fields CreateClaim wrote).
func (db *DB) logClaim(ctx context.Context, tx *sql.Tx, c *dotlab.Claim) error {
	return db.logEntry(ctx, tx, tlogfmt.ClaimEntry(c))
}

// logSettlement logs claim id's settlement, as written in tx.
func (db *DB) logSettlement(ctx context.Context, tx *sql.Tx, id string) error {
	if db.log == nil {
		return nil
	}
	c := &dotlab.Claim{ID: id}
	var runID sql.NullString
	var settled sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT outcome, run_id, settled_at FROM claims WHERE id = $1`, id).Scan(&c.Outcome, &runID, &settled); err != nil {
		return err
	}
	c.RunID, c.SettledAt = runID.String, fromNullMS(settled)
	return db.logEntry(ctx, tx, tlogfmt.SettlementEntry(c))
}

// logOffer logs runnerID's acceptance of claimID's job.
func (db *DB) logOffer(ctx context.Context, tx *sql.Tx, claimID, runnerID string, at, deadline time.Time) error {
	return db.logEntry(ctx, tx, tlogfmt.OfferEntry(claimID, runnerID, at, deadline))
}

// appendLog appends entries in tx, in order (nothing when logging is off).
func (db *DB) appendLog(ctx context.Context, tx *sql.Tx, entries []tlogfmt.Entry) error {
	for _, e := range entries {
		if err := db.logEntry(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}

// logMessage logs lab message m's digest.
func (db *DB) logMessage(ctx context.Context, tx *sql.Tx, m *dotlab.LabMessage) error {
	return db.logEntry(ctx, tx, tlogfmt.MessageEntry(m))
}

// logEnvelope logs env, the verified signature of record subjectID of type
// subjectType on claimID (nothing when env is nil: an unsigned record).
func (db *DB) logEnvelope(ctx context.Context, tx *sql.Tx, subjectType tlogfmt.EntryType, claimID, subjectID string, env *dotlab.Envelope) error {
	if env == nil {
		return nil
	}
	return db.logEntry(ctx, tx, tlogfmt.EnvelopeEntry(subjectType, claimID, subjectID, env))
}

// envelopeText is env's stored JSON, NULL for an unsigned record.
func envelopeText(env *dotlab.Envelope) (sql.NullString, error) {
	if env == nil {
		return sql.NullString{}, nil
	}
	data, err := json.Marshal(env)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(data), Valid: true}, nil
}

// useStatement records that the record of s signs with statement s.SHA256
// and key s.KeyID on claimID, in the record's transaction; nothing for an
// unsigned record (s.SHA256 ""). A signed statement some record used
// already is store.ErrStatementUsed, so the transaction writes nothing.
func useStatement(ctx context.Context, tx *sql.Tx, claimID string, s store.SignedStatement, at time.Time) error {
	if s.SHA256 == "" {
		return nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO signed_statements (sha256, keyid, subject_type, subject_id, claim_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (sha256, keyid) DO NOTHING`, s.SHA256, s.KeyID, string(s.SubjectType), s.SubjectID, claimID, ms(at))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return store.ErrStatementUsed
	}
	return nil
}

// StatementUse is the record that used the statement of digest sha256
// signed with key keyID, "<subject type> <subject id>" (store.Reader).
func (db *DB) StatementUse(ctx context.Context, sha256, keyID string) (subject string, found bool, err error) {
	var typ, id string
	err = db.r.QueryRowContext(ctx, `SELECT subject_type, subject_id FROM signed_statements WHERE sha256 = $1 AND keyid = $2`, sha256, keyID).Scan(&typ, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return typ + " " + id, true, nil
}
