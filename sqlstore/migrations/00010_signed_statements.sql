-- Signed statements used (docs/threat-model.md "Replay and borrowed keys"):
-- one row per accepted envelope, keyed by the SHA-256 of its decoded
-- payload (the in-toto statement's bytes, whichever base64 alphabet spelled
-- them) and the key that signed it (two reviewers may sign the same v1
-- statement: the same vote with the same rationale names no agent), naming
-- the record it signs. The primary key refuses a second record bound to
-- the same signed statement on both engines. Envelopes accepted
-- before this migration have no row: each is already the only one of its
-- record (one run per claim, one challenge per agent per claim, one vote
-- per reviewer), and its statement names that record.

-- +goose Up
CREATE TABLE signed_statements (
    sha256       TEXT NOT NULL,      -- lowercase hex SHA-256 of the statement
    keyid        TEXT NOT NULL,      -- the signing key's id (agents.keyid)
    subject_type TEXT NOT NULL,      -- run, challenge, vote
    subject_id   TEXT NOT NULL,      -- run_…, ch_…, DL-0001:ag_…
    claim_id     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (sha256, keyid)
);

-- +goose Down
DROP TABLE signed_statements;
