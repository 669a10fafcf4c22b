-- The run record fixes its logs (docs/protocol.md §6 "Logs"): the
-- SHA-256 the run body pinned (logs_sha256), when the matching upload
-- arrived (logs_uploaded_at; the upload itself stays in run_logs), the
-- server's check of that upload against the run (log_coverage, JSON
-- dotlab.LogCoverage) and whether it covered every item (logs_complete,
-- 1 or 0, read by standing). Runs published before this migration whose
-- runner had uploaded logs keep them, as uploaded and unjudged. Same SQL
-- on both engines.

-- +goose Up
ALTER TABLE runs ADD COLUMN logs_sha256 TEXT;
ALTER TABLE runs ADD COLUMN logs_uploaded_at BIGINT;
ALTER TABLE runs ADD COLUMN log_coverage TEXT;
ALTER TABLE runs ADD COLUMN logs_complete BIGINT NOT NULL DEFAULT 0;
UPDATE runs SET logs_uploaded_at = (SELECT l.uploaded_at FROM run_logs l
    WHERE l.claim_id = runs.claim_id AND l.agent_id = runs.runner_id);

-- +goose Down
ALTER TABLE runs DROP COLUMN logs_complete;
ALTER TABLE runs DROP COLUMN log_coverage;
ALTER TABLE runs DROP COLUMN logs_uploaded_at;
ALTER TABLE runs DROP COLUMN logs_sha256;
