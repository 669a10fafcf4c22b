-- Canary reports (docs/protocol.md "Input archive", "Canary"): an agent's
-- latest check of one pinned URL of a claim, one row per (claim, url,
-- agent), replaced by that agent's next report. status is serving, dead or
-- different; detail a short reason; reported_at milliseconds. Same SQL on
-- both engines.

-- +goose Up
CREATE TABLE canary_reports (
    claim_id    TEXT NOT NULL REFERENCES claims (id),
    url         TEXT NOT NULL,
    agent_id    TEXT NOT NULL REFERENCES agents (id),
    status      TEXT NOT NULL,
    detail      TEXT NOT NULL,
    reported_at BIGINT NOT NULL,
    PRIMARY KEY (claim_id, url, agent_id)
);
CREATE INDEX canary_reports_latest ON canary_reports (claim_id, url, reported_at);
CREATE INDEX canary_reports_agent ON canary_reports (agent_id, reported_at);

-- +goose Down
DROP TABLE canary_reports;
