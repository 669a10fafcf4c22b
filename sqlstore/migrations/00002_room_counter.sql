-- A per-room message counter on the claim row: posting takes the next seq
-- with one UPDATE … RETURNING, which serialises concurrent posts to one
-- room on both engines (a MAX(seq)+1 read raced under PostgreSQL's READ
-- COMMITTED).

-- +goose Up
ALTER TABLE claims ADD COLUMN msg_seq BIGINT NOT NULL DEFAULT 0;
UPDATE claims SET msg_seq = (SELECT COALESCE(MAX(seq), 0) FROM lab_messages WHERE lab_messages.claim_id = claims.id);

-- +goose Down
ALTER TABLE claims DROP COLUMN msg_seq;
