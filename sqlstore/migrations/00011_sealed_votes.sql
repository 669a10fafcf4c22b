-- Sealed votes (docs/mechanism.md §4a, `dotlab serve --sealed-votes`).
-- sealed_rounds holds each sealed dispute's current round: its number, its
-- phase (commit | reveal) and deadlines (Unix ms). sealed_seats holds every
-- committee seat of every round: the reviewer's commitment, and the vote
-- the server holds (revealed, or sealed by the server) but shows only once
-- the dispute is decided, when it is copied into votes with its salt.

-- +goose Up
CREATE TABLE sealed_rounds (
    claim_id        TEXT PRIMARY KEY REFERENCES claims (id),
    round           INTEGER NOT NULL,
    phase           TEXT NOT NULL,
    commit_deadline BIGINT NOT NULL,
    reveal_deadline BIGINT
);
CREATE INDEX sealed_rounds_commit_due ON sealed_rounds (phase, commit_deadline);
CREATE INDEX sealed_rounds_reveal_due ON sealed_rounds (phase, reveal_deadline);

CREATE TABLE sealed_seats (
    claim_id     TEXT NOT NULL REFERENCES claims (id),
    reviewer_id  TEXT NOT NULL REFERENCES agents (id),
    round        INTEGER NOT NULL,
    assigned_at  BIGINT NOT NULL,
    commitment   TEXT,
    committed_at BIGINT,
    vote         TEXT,
    rationale    TEXT,
    salt         TEXT,
    envelope     TEXT,
    voted_at     BIGINT,
    abstained    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (claim_id, reviewer_id)
);
CREATE INDEX sealed_seats_reviewer ON sealed_seats (reviewer_id);

ALTER TABLE votes ADD COLUMN salt TEXT;

-- +goose Down
ALTER TABLE votes DROP COLUMN salt;
DROP TABLE sealed_seats;
DROP TABLE sealed_rounds;
