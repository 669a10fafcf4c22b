-- Output listings that travel beside a run or challenge record
-- (docs/protocol.md §6 "Output listing"): uploaded by the agent before its
-- record (one per agent per claim: an agent holds one role, so one record),
-- replaced while no record pins it, then fixed: record_id is the run or
-- challenge that pinned it, set in the record's own transaction. listing is
-- the canonical JSON-lines text (dotlab.EncodeOutputListing), sha256 its
-- SHA-256, entries and bytes its count and length. Same SQL on both engines.

-- +goose Up
CREATE TABLE output_listings (
    claim_id    TEXT NOT NULL REFERENCES claims (id),
    agent_id    TEXT NOT NULL REFERENCES agents (id),
    sha256      TEXT NOT NULL,
    entries     BIGINT NOT NULL,
    bytes       BIGINT NOT NULL,
    listing     TEXT NOT NULL,
    uploaded_at BIGINT NOT NULL,
    record_id   TEXT,
    PRIMARY KEY (claim_id, agent_id)
);
CREATE UNIQUE INDEX output_listings_record ON output_listings (record_id);
CREATE INDEX output_listings_agent ON output_listings (agent_id, record_id);

-- +goose Down
DROP TABLE output_listings;
