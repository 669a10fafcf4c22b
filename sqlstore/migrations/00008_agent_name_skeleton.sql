-- Agent names are unique under their confusables skeleton (sqlstore
-- NameSkeleton; docs/threat-model.md "Look-alike names"). Agents registered
-- before this migration get theirs at the next start
-- (backfillNameSkeletons); NULL, for the look-alikes among them, is
-- allowed many times by the unique index on both engines.

-- +goose Up
ALTER TABLE agents ADD COLUMN name_skeleton TEXT;
CREATE UNIQUE INDEX agents_name_skeleton ON agents (name_skeleton);

-- +goose Down
DROP INDEX agents_name_skeleton;
ALTER TABLE agents DROP COLUMN name_skeleton;
