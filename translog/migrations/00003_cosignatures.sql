-- Witness cosignatures (docs/verification.md "Witnesses"): for each witness
-- the server submits checkpoints to (c2sp.org/tlog-witness), the latest
-- checkpoint it cosigned. One SQL text for SQLite and PostgreSQL.

-- +goose Up
-- log_cosignatures: witness is the witness's cosignature/v1 verifier key as
-- configured (`dotlab serve --witness URL=KEY`); checkpoint the log's signed
-- note of tree size size (the log's signature only); cosignature the
-- witness's signature line(s) on it (c2sp.org/tlog-cosignature, each ending
-- in a newline), checked with the key before they are stored; cosigned_at
-- its timestamp (Unix seconds). A row only moves to a larger or equal size.
CREATE TABLE log_cosignatures (
    witness     TEXT PRIMARY KEY,
    size        BIGINT NOT NULL,
    checkpoint  TEXT NOT NULL,
    cosignature TEXT NOT NULL,
    cosigned_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE log_cosignatures;
