-- Partial indexes that lead with state, so that SQLite picks them for the
-- draw and the settlement sweep without planner statistics (with only the
-- equality index claims_state (state, number) usable, it read and sorted
-- every funded claim per draw). Same SQL on PostgreSQL.

-- +goose Up
DROP INDEX claims_draw;
DROP INDEX claims_offer_due;
DROP INDEX claims_publish_due;
DROP INDEX claims_challenge_due;
CREATE INDEX claims_draw ON claims (state, draw_key) WHERE state = 'funded' AND runner_id IS NULL;
CREATE INDEX claims_offer_due ON claims (state, offer_expires_at) WHERE offer_expires_at IS NOT NULL;
CREATE INDEX claims_publish_due ON claims (state, publish_deadline) WHERE publish_deadline IS NOT NULL;
CREATE INDEX claims_challenge_due ON claims (state, challenge_deadline) WHERE challenge_deadline IS NOT NULL;

-- +goose Down
DROP INDEX claims_draw;
DROP INDEX claims_offer_due;
DROP INDEX claims_publish_due;
DROP INDEX claims_challenge_due;
CREATE INDEX claims_draw ON claims (draw_key) WHERE state = 'funded' AND runner_id IS NULL;
CREATE INDEX claims_offer_due ON claims (offer_expires_at) WHERE offer_expires_at IS NOT NULL;
CREATE INDEX claims_publish_due ON claims (publish_deadline) WHERE publish_deadline IS NOT NULL;
CREATE INDEX claims_challenge_due ON claims (challenge_deadline) WHERE challenge_deadline IS NOT NULL;
