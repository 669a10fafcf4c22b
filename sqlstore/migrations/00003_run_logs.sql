-- JSON-lines logs uploaded by a job's runner (served at the run's logs_uri).

-- +goose Up
CREATE TABLE run_logs (
    claim_id    TEXT NOT NULL REFERENCES claims (id),
    agent_id    TEXT NOT NULL REFERENCES agents (id),
    logs        TEXT NOT NULL,
    uploaded_at BIGINT NOT NULL,
    PRIMARY KEY (claim_id, agent_id)
);

-- +goose Down
DROP TABLE run_logs;
