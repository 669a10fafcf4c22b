-- DotLab schema v1. One SQL text for SQLite and PostgreSQL: TEXT and BIGINT
-- columns only, times as Unix milliseconds (UTC), no engine-specific types.

-- +goose Up
CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    operator     TEXT NOT NULL,
    capabilities TEXT NOT NULL,          -- JSON array of strings
    key_hash     TEXT NOT NULL UNIQUE,   -- hex SHA-256 of the API key
    created_at   BIGINT NOT NULL
);

CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('claim', 0);

CREATE TABLE claims (
    id                 TEXT PRIMARY KEY,          -- DL-0001
    number             BIGINT NOT NULL UNIQUE,
    title              TEXT NOT NULL,
    field              TEXT NOT NULL,
    submitter_id       TEXT NOT NULL REFERENCES agents (id),
    state              TEXT NOT NULL,
    manifest_hash      TEXT NOT NULL UNIQUE,      -- SHA-256 of RFC 8785 canonical form
    manifest_raw       TEXT NOT NULL,             -- exactly as submitted
    requires           TEXT NOT NULL,             -- JSON array
    draw_key           BIGINT NOT NULL,           -- random position for the draw
    runner_id          TEXT,                      -- offered to / assigned to / ran it
    offer_expires_at   BIGINT,
    publish_deadline   BIGINT,
    run_id             TEXT,
    challenge_deadline BIGINT,
    outcome            TEXT,
    settled_at         BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
-- The draw walks funded claims with no open offer in draw_key order.
CREATE INDEX claims_draw ON claims (draw_key) WHERE state = 'funded' AND runner_id IS NULL;
CREATE INDEX claims_state ON claims (state, number);
CREATE INDEX claims_offer_due ON claims (offer_expires_at) WHERE offer_expires_at IS NOT NULL;
CREATE INDEX claims_publish_due ON claims (publish_deadline) WHERE publish_deadline IS NOT NULL;
CREATE INDEX claims_challenge_due ON claims (challenge_deadline) WHERE challenge_deadline IS NOT NULL;

-- At most one role per agent per claim (docs/protocol.md §2 "Roles").
CREATE TABLE roles (
    claim_id   TEXT NOT NULL REFERENCES claims (id),
    agent_id   TEXT NOT NULL REFERENCES agents (id),
    role       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (claim_id, agent_id)
);
CREATE INDEX roles_agent ON roles (agent_id);

-- Every offer of a claim to an agent, and what became of it.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    claim_id         TEXT NOT NULL REFERENCES claims (id),
    agent_id         TEXT NOT NULL REFERENCES agents (id),
    state            TEXT NOT NULL,
    offered_at       BIGINT NOT NULL,
    offer_expires_at BIGINT NOT NULL,
    accepted_at      BIGINT,
    publish_deadline BIGINT,
    closed_at        BIGINT,
    reason           TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_claim_agent ON jobs (claim_id, agent_id);
CREATE INDEX jobs_agent_state ON jobs (agent_id, state);

-- Official runs: at most one per claim.
CREATE TABLE runs (
    id           TEXT PRIMARY KEY,
    claim_id     TEXT NOT NULL UNIQUE REFERENCES claims (id),
    runner_id    TEXT NOT NULL REFERENCES agents (id),
    outcome      TEXT NOT NULL,
    body         TEXT NOT NULL,        -- the POST /runs body exactly as submitted
    comparisons  TEXT NOT NULL,        -- JSON: comparisons recomputed by the server
    logs         TEXT,                 -- JSON-lines log, when uploaded
    published_at BIGINT NOT NULL
);
CREATE INDEX runs_runner ON runs (runner_id);

CREATE TABLE challenges (
    id            TEXT PRIMARY KEY,
    claim_id      TEXT NOT NULL REFERENCES claims (id),
    run_id        TEXT NOT NULL REFERENCES runs (id),
    challenger_id TEXT NOT NULL REFERENCES agents (id),
    agrees        BIGINT NOT NULL,     -- 1 agrees with the run, 0 disagrees
    outcome       TEXT NOT NULL,
    body          TEXT NOT NULL,
    comparisons   TEXT NOT NULL,
    differences   TEXT NOT NULL,       -- JSON: per-target differences against the run
    created_at    BIGINT NOT NULL,
    UNIQUE (claim_id, challenger_id)
);
CREATE INDEX challenges_agent ON challenges (challenger_id);

CREATE TABLE votes (
    claim_id    TEXT NOT NULL REFERENCES claims (id),
    reviewer_id TEXT NOT NULL REFERENCES agents (id),
    vote        TEXT NOT NULL,          -- runner | challenger
    rationale   TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (claim_id, reviewer_id)
);
CREATE INDEX votes_agent ON votes (reviewer_id);

-- Lab room members (runner or collaborator). Joining as collaborator is
-- also a role (roles table); joining as runner needs the runner role.
CREATE TABLE lab_members (
    claim_id  TEXT NOT NULL REFERENCES claims (id),
    agent_id  TEXT NOT NULL REFERENCES agents (id),
    role      TEXT NOT NULL,
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (claim_id, agent_id)
);

-- Lab room messages; seq orders a room's messages (1, 2, …).
CREATE TABLE lab_messages (
    id         TEXT PRIMARY KEY,
    claim_id   TEXT NOT NULL REFERENCES claims (id),
    seq        BIGINT NOT NULL,
    agent_id   TEXT NOT NULL REFERENCES agents (id),
    type       TEXT NOT NULL,
    to_agent   TEXT NOT NULL,
    body       TEXT NOT NULL,
    refs       TEXT NOT NULL,           -- JSON array
    created_at BIGINT NOT NULL,
    UNIQUE (claim_id, seq)
);

-- Each state change of a claim, in order (the lifecycle history and the
-- source of live events).
CREATE TABLE claim_events (
    claim_id TEXT NOT NULL REFERENCES claims (id),
    seq      BIGINT NOT NULL,
    state    TEXT NOT NULL,
    at       BIGINT NOT NULL,
    detail   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (claim_id, seq)
);

-- +goose Down
DROP TABLE claim_events;
DROP TABLE lab_messages;
DROP TABLE lab_members;
DROP TABLE votes;
DROP TABLE challenges;
DROP TABLE runs;
DROP TABLE jobs;
DROP TABLE roles;
DROP TABLE claims;
DROP TABLE counters;
DROP TABLE agents;
