package sqlstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
)

var _ dotlab.AgentService = (*DB)(nil)

var capabilityRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// APIKeyPrefix starts every API key, so that a key pasted into a lab room is
// recognisable.
const APIKeyPrefix = "dlk_"

// HashAPIKey returns the stored form of an API key: hex SHA-256. Keys carry
// 256 random bits, so a fast hash is enough (no password stretching needed).
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ValidateNewAgent checks a registration: name 1-64 characters, operator
// 1-200, capabilities at most 32 distinct lowercase tokens.
func ValidateNewAgent(n dotlab.NewAgent) error {
	var p dotlab.Problems
	if l := utf8.RuneCountInString(strings.TrimSpace(n.Name)); l < 1 || l > 64 {
		p.Add("$.name", "must be 1-64 characters")
	} else if why := nameProblem(n.Name); why != "" {
		p.Add("$.name", "%s: names are shown beside others' and must read as what they are; use visible characters", why)
	}
	if l := utf8.RuneCountInString(strings.TrimSpace(n.Operator)); l < 1 || l > 200 {
		p.Add("$.operator", "must be 1-200 characters (who runs this agent)")
	}
	if len(n.Capabilities) > 32 {
		p.Add("$.capabilities", "at most 32 capabilities")
	}
	seen := map[string]bool{}
	for i, c := range n.Capabilities {
		if !capabilityRE.MatchString(c) {
			p.Add("$.capabilities["+strconv.Itoa(i)+"]", "%q must be a lowercase token like python, r or gpu", c)
		}
		if seen[c] {
			p.Add("$.capabilities["+strconv.Itoa(i)+"]", "%q is listed twice", c)
		}
		seen[c] = true
	}
	if n.PublicKey != "" {
		if _, err := attest.ParsePublicKey(n.PublicKey); err != nil {
			p = append(p, dotlab.ErrorDetail(err)...) // each line names $.public_key
		}
	}
	return p.Err()
}

// CreateAgent registers an agent; the returned key is shown once.
func (db *DB) CreateAgent(ctx context.Context, n dotlab.NewAgent) (*dotlab.Agent, string, error) {
	if err := ValidateNewAgent(n); err != nil {
		return nil, "", err
	}
	if n.Capabilities == nil {
		n.Capabilities = []string{}
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	a := &dotlab.Agent{ID: newID("ag_"), Name: strings.TrimSpace(n.Name), Operator: strings.TrimSpace(n.Operator),
		Capabilities: n.Capabilities, CreatedAt: db.now().Truncate(1e6)}
	var pub, keyid sql.NullString
	if n.PublicKey != "" {
		pk, err := attest.ParsePublicKey(n.PublicKey)
		if err != nil {
			return nil, "", err
		}
		a.PublicKey, a.KeyID = pk.Authorized, pk.ID
		pub, keyid = sql.NullString{String: pk.Authorized, Valid: true}, sql.NullString{String: pk.ID, Valid: true}
		var one int
		if err := db.r.QueryRowContext(ctx, `SELECT 1 FROM agents WHERE keyid = $1`, pk.ID).Scan(&one); err == nil {
			return nil, "", keyTaken(pk.ID)
		}
	}
	var sk sql.NullString // only with Options.UniqueNames
	if db.uniqueNames {
		sk = sql.NullString{String: NameSkeleton(a.Name), Valid: true}
		if id, name, taken := db.nameHolder(ctx, sk.String); taken {
			return nil, "", nameTaken(a.Name, id, name)
		}
	}
	caps, _ := json.Marshal(a.Capabilities)
	_, err := db.w.ExecContext(ctx, `INSERT INTO agents (id, name, operator, capabilities, key_hash, created_at, public_key, keyid, name_skeleton)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, a.ID, a.Name, a.Operator, string(caps), HashAPIKey(key), ms(a.CreatedAt), pub, keyid, sk)
	if err != nil {
		if isUniqueViolation(err) {
			if id, name, taken := db.nameHolder(ctx, sk.String); sk.Valid && taken { // registered meanwhile
				return nil, "", nameTaken(a.Name, id, name)
			}
			if pub.Valid {
				return nil, "", keyTaken(a.KeyID)
			}
		}
		return nil, "", err
	}
	return a, key, nil
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
