-- Signed records (docs/verification.md "Signed records"): an agent may
-- register an Ed25519 key (public_key, OpenSSH authorized_keys form; keyid,
-- its SHA256 fingerprint, unique: one key signs for one agent). Runs and
-- challenges keep their envelope inside the body as posted; votes keep it
-- here (JSON dotlab.Envelope). Same SQL on both engines.

-- +goose Up
ALTER TABLE agents ADD COLUMN public_key TEXT;
ALTER TABLE agents ADD COLUMN keyid TEXT;
CREATE UNIQUE INDEX agents_keyid ON agents (keyid);
ALTER TABLE votes ADD COLUMN envelope TEXT;

-- +goose Down
ALTER TABLE votes DROP COLUMN envelope;
DROP INDEX agents_keyid;
ALTER TABLE agents DROP COLUMN keyid;
ALTER TABLE agents DROP COLUMN public_key;
