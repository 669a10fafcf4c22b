-- The transparency log (docs/verification.md). One SQL text for SQLite and
-- PostgreSQL. Applied by package translog with its own goose version table
-- (translog_db_version), beside sqlstore's.

-- +goose Up
-- log_head holds the tree size in its one row. Appending updates it first
-- in the record's own transaction: the row lock orders appends across
-- server processes, so indexes have no gap and no duplicate.
CREATE TABLE log_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    size BIGINT NOT NULL
);
INSERT INTO log_head (id, size) VALUES (1, 0);

-- log_entries: entry idx (0-based) as logged (tlogfmt canonical JSON), and
-- the stored hashes that appending it made (golang.org/x/mod/sumdb/tlog
-- StoredHashes: its leaf hash, then the hash of every subtree it completed,
-- 32 bytes each, lowest level first), so that one row is written per entry.
CREATE TABLE log_entries (
    idx       BIGINT PRIMARY KEY,
    type      TEXT NOT NULL,
    claim_id  TEXT NOT NULL,
    record_id TEXT NOT NULL,
    body      BYTEA NOT NULL,
    hashes    BYTEA NOT NULL,
    UNIQUE (type, record_id)
);
CREATE INDEX log_entries_claim ON log_entries (claim_id, idx);

-- log_signer: the log's Ed25519 note key (golang.org/x/mod/sumdb/note
-- encoding), made at the first start and shared by every server process.
CREATE TABLE log_signer (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    signer_key   TEXT NOT NULL,
    verifier_key TEXT NOT NULL
);

-- +goose Down
DROP TABLE log_signer;
DROP TABLE log_entries;
DROP TABLE log_head;
