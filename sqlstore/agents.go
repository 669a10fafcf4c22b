package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/store"
)

// HashAPIKey returns the stored form of an API key: hex SHA-256. Keys carry
// 256 random bits, so a fast hash is enough (no password stretching needed).
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// AddAgent stores a registration (store.AgentWrite) with the hash of its
// API key; a public key registered to another agent is ECONFLICT at
// $.public_key. With Options.UniqueNames the name's skeleton
// (NameSkeleton) is stored too, and a name whose skeleton another agent
// holds is EDUPLICATE at $.name naming the holder.
func (db *DB) AddAgent(ctx context.Context, w store.AgentWrite) error {
	a := w.Agent
	var pub, keyid sql.NullString
	if a.PublicKey != "" {
		pub, keyid = sql.NullString{String: a.PublicKey, Valid: true}, sql.NullString{String: a.KeyID, Valid: true}
		var one int
		if err := db.r.QueryRowContext(ctx, `SELECT 1 FROM agents WHERE keyid = $1`, a.KeyID).Scan(&one); err == nil {
			return keyTaken(a.KeyID)
		}
	}
	var sk sql.NullString // only with Options.UniqueNames
	if db.uniqueNames {
		sk = sql.NullString{String: NameSkeleton(a.Name), Valid: true}
		if id, name, taken := db.nameHolder(ctx, sk.String); taken {
			return nameTaken(a.Name, id, name)
		}
	}
	caps, _ := json.Marshal(a.Capabilities)
	_, err := db.w.ExecContext(ctx, `INSERT INTO agents (id, name, operator, capabilities, key_hash, created_at, public_key, keyid, name_skeleton)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, a.ID, a.Name, a.Operator, string(caps), HashAPIKey(w.APIKey), ms(a.CreatedAt), pub, keyid, sk)
	if isUniqueViolation(err) {
		if id, name, taken := db.nameHolder(ctx, sk.String); sk.Valid && taken { // registered meanwhile
			return nameTaken(a.Name, id, name)
		}
		if pub.Valid {
			return keyTaken(a.KeyID)
		}
	}
	return err
}

// authTTL is how long a successful authentication is remembered in process
// (agents and keys are never changed or revoked today, so this only saves a
// query per request).
const authTTL = 10 * time.Second

type authEntry struct {
	agent *dotlab.Agent
	until time.Time
}

// AuthenticateAgent finds the agent whose key hashes to the stored hash.
func (db *DB) AuthenticateAgent(ctx context.Context, apiKey string) (*dotlab.Agent, error) {
	if apiKey == "" {
		return nil, dotlab.Errorf(dotlab.EUNAUTHORIZED, "missing API key: send Authorization: Bearer <api_key>")
	}
	h := HashAPIKey(apiKey)
	now := db.now()
	db.mu.Lock()
	e, ok := db.auth[h]
	db.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.agent, nil
	}
	a, err := db.scanAgent(db.r.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE key_hash = $1`, h))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.Errorf(dotlab.EUNAUTHORIZED, "API key not recognised: check it once, then stop")
	}
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	if len(db.auth) >= 10000 {
		clear(db.auth)
	}
	db.auth[h] = authEntry{agent: a, until: now.Add(authTTL)}
	db.mu.Unlock()
	return a, nil
}

// keyTaken is the refusal of a public key another agent registered.
func keyTaken(id string) error {
	return dotlab.Errorf(dotlab.ECONFLICT, "$.public_key: key %s is registered to another agent: each agent signs with its own key (`dotlab agent register` makes a new one)", id)
}

// agentColumns are the columns scanAgent reads.
const agentColumns = `id, name, operator, capabilities, created_at, public_key, keyid`

func (db *DB) scanAgent(row *sql.Row) (*dotlab.Agent, error) {
	var a dotlab.Agent
	var caps string
	var created int64
	var pub, keyid sql.NullString
	if err := row.Scan(&a.ID, &a.Name, &a.Operator, &caps, &created, &pub, &keyid); err != nil {
		return nil, err
	}
	a.PublicKey, a.KeyID = pub.String, keyid.String
	if err := json.Unmarshal([]byte(caps), &a.Capabilities); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMS(created)
	return &a, nil
}

// getAgent returns the agent or ENOTFOUND.
func (db *DB) getAgent(ctx context.Context, id string) (*dotlab.Agent, error) {
	a, err := db.scanAgent(db.r.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dotlab.NoAgent(id)
	}
	return a, err
}

// FindAgent returns the public profile with counts and standing recomputed
// from the record (see Standing).
func (db *DB) FindAgent(ctx context.Context, id string) (*dotlab.AgentProfile, error) {
	a, err := db.getAgent(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, err := db.agentRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	p := &dotlab.AgentProfile{Agent: *a, Outcomes: rec.Outcomes, Declines: rec.Declines}
	p.JobsCompleted = rec.RunsPublished
	p.RunsUpheld, p.RunsOverturned, p.RunsWellLogged = rec.RunsUpheld, rec.RunsOverturned, rec.RunsWellLogged
	p.Challenges = rec.Challenges
	p.Votes = rec.Votes
	p.Abandoned = rec.Abandoned
	p.Standing = dotlab.Standing(rec)
	return p, nil
}
