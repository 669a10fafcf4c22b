package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
)

// Signing (docs/verification.md "Signed records"): `dotlab agent register`
// makes an Ed25519 key, keeps its private half in <config dir>/keys (mode
// 0600) and registers the public half with the agent; the agent then signs
// every run, challenge and vote it posts (attest), with a statement bound
// to the server's log and its agent id where the server takes those (v2),
// else a v1 one. An agent with no key posts unsigned records.

// RegisterSigned registers n with a new signing key and returns the
// registration and the key (kept in memory only; the demo and tests use
// it, `dotlab agent register` stores it with Register).
func RegisterSigned(ctx context.Context, c *client.Client, n dotlab.NewAgent) (*apiv1.AgentCreated, *attest.Key, error) {
	k, err := attest.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	if err := WithKeyProof(ctx, c, &n, k); err != nil {
		return nil, nil, err
	}
	a, err := c.Register(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	return a, k, nil
}

// WithKeyProof sets n's public key to k's and its key proof for c's
// server: the server's log origin and time (GET /status), signed with
// k with the name and key (attest.Key.KeyProof), which the server demands
// of a registration with a key (docs/verification.md §7).
func WithKeyProof(ctx context.Context, c *client.Client, n *dotlab.NewAgent, k *attest.Key) error {
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	origin := ""
	if st.Log != nil {
		origin = st.Log.Origin
	}
	// The server's own time (GET /status time) is signed: its clock
	// decides freshness, whatever this machine's says.
	at, err := time.Parse(time.RFC3339Nano, st.Time)
	if err != nil {
		at = dotlab.SystemClock{}.Now()
	}
	n.PublicKey = k.Public().Authorized
	n.KeyProof = k.KeyProof(origin, n.Name, at)
	return nil
}

// keyPath is where a key is kept: <config dir>/keys/<hex SHA-256 of the
// authorized_keys line>.pem.
func keyPath(k *attest.PublicKey) (string, error) {
	dir, err := ConfigDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(k.Authorized))
	return filepath.Join(dir, "keys", hex.EncodeToString(sum[:16])+".pem"), nil
}

// Register is `dotlab agent register`: a new signing key stored under the
// config dir (before the server hears of it, so a registered key is never
// lost), the agent registered with it, and its credentials stored for
// c.Server() (CredentialsPath). It returns the registration and where the
// credentials were stored. The API key is never printed. An agent already
// stored for that server is kept (its key is shown nowhere else, so
// replacing it would lose it for good) unless replace is set.
func Register(ctx context.Context, c *client.Client, n dotlab.NewAgent, replace bool) (*apiv1.AgentCreated, string, error) {
	all, p, err := stored()
	if err != nil {
		return nil, "", err
	}
	if old, ok := all[c.Server()]; ok && !replace {
		return nil, "", fmt.Errorf("agent %s (%s) is already registered for %s in %s: keep using it, or register another with --replace (the old agent's API key is then forgotten), or with DOTLAB_CONFIG_DIR set to another directory", old.AgentID, old.Name, c.Server(), p)
	}
	k, err := attest.GenerateKey()
	if err != nil {
		return nil, "", err
	}
	kp, err := keyPath(k.Public())
	if err == nil {
		err = k.Save(kp)
	}
	if err != nil {
		return nil, "", fmt.Errorf("store the signing key: %w", err)
	}
	if err := WithKeyProof(ctx, c, &n, k); err != nil {
		os.Remove(kp)
		return nil, "", err
	}
	a, err := c.Register(ctx, n)
	if err != nil {
		os.Remove(kp)
		return nil, "", err
	}
	if err := SaveCredentials(p, c.Server(), Credentials{AgentID: a.ID, Name: a.Name, APIKey: a.APIKey, SigningKey: kp}); err != nil {
		return nil, "", fmt.Errorf("registered as %s but could not store the key: %w", a.ID, err)
	}
	return a, p, nil
}

// StoredKey is the signing key of the agent registered for server:
// $DOTLAB_SIGNING_KEY (a key file) when set; else, unless $DOTLAB_API_KEY
// names some other agent, the key file in the server's stored credentials.
// ok is false when there is none (the agent posts unsigned records).
func StoredKey(server string) (k *attest.Key, ok bool, err error) {
	if p := os.Getenv("DOTLAB_SIGNING_KEY"); p != "" {
		k, err := attest.LoadKey(p)
		return k, err == nil, err
	}
	all, _, err := stored()
	if err != nil {
		return nil, false, err
	}
	cr, found := all[strings.TrimRight(server, "/")]
	if !found {
		cr, found = all[server]
	}
	if !found || cr.SigningKey == "" {
		return nil, false, nil
	}
	if key := os.Getenv("DOTLAB_API_KEY"); key != "" && key != cr.APIKey {
		return nil, false, nil // another agent's key: it signs with DOTLAB_SIGNING_KEY or not at all
	}
	k, err = attest.LoadKey(cr.SigningKey)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("the signing key of %s is missing (%s): restore it, or register a new agent", cr.AgentID, cr.SigningKey)
	}
	return k, err == nil, err
}

// refusedSignature reports a refusal of a record's envelope (not of the
// record): the key on file is not the one the server holds for this agent.
func refusedSignature(err error) bool {
	return dotlab.ErrorCode(err) == dotlab.EINVALID && strings.Contains(err.Error(), "$.envelope")
}

// FeatureBoundSignatures is the GET /status feature of a server that takes
// bound (v2) statements: predicates naming its log origin and the agent id
// (docs/verification.md §7).
const FeatureBoundSignatures = "bound_signatures"

// binding is what this agent's statements name on its server: the log
// origin (GET /status log.origin) and this agent's id (GET /agents/me),
// read once. ok is false when the server keeps no log, does not list
// FeatureBoundSignatures (an older server, which takes v1 statements only)
// or did not answer: the agent then signs v1 statements, which name
// neither.
func (a *Agent) binding(ctx context.Context) (attest.Binding, bool) {
	a.bindMu.Lock()
	defer a.bindMu.Unlock()
	if a.bind == nil {
		st, err := a.Client.Status(ctx)
		if err != nil {
			a.logf("signing without binding to the log (v1 statement): GET /status: %v", err)
			return attest.Binding{}, false
		}
		b := attest.Binding{}
		if st.Log != nil && st.Features[FeatureBoundSignatures] {
			me, err := a.Client.Me(ctx)
			if err != nil {
				a.logf("signing without binding to the log (v1 statement): GET /agents/me: %v", err)
				return attest.Binding{}, false
			}
			b = attest.Binding{LogOrigin: st.Log.Origin, AgentID: me.ID}
		}
		a.bind = &b
	}
	return *a.bind, a.bind.LogOrigin != "" && a.bind.AgentID != ""
}

// signRun signs b with k for publishing (nothing when k is nil): a v2
// statement bound to the server's log and this agent when the server
// takes them (binding), else a v1 statement.
func (a *Agent) signRun(ctx context.Context, k *attest.Key, b *dotlab.RunBody) {
	b.Envelope = nil
	if k == nil {
		return
	}
	var env *dotlab.Envelope
	var err error
	if bind, ok := a.binding(ctx); ok {
		env, err = attest.SignBoundRun(ctx, k, bind, b)
	} else {
		env, err = attest.SignRun(ctx, k, b)
	}
	if err != nil {
		a.logf("%s: publishing unsigned: %v", b.JobID, err)
		return
	}
	b.Envelope = env
}

// signChallenge signs b with k for posting (nothing when k is nil), bound
// as signRun's.
func (a *Agent) signChallenge(ctx context.Context, k *attest.Key, b *dotlab.ChallengeBody) {
	b.Envelope = nil
	if k == nil {
		return
	}
	var env *dotlab.Envelope
	var err error
	if bind, ok := a.binding(ctx); ok {
		env, err = attest.SignBoundChallenge(ctx, k, bind, b)
	} else {
		env, err = attest.SignChallenge(ctx, k, b)
	}
	if err != nil {
		a.logf("%s: challenging unsigned: %v", b.ClaimID, err)
		return
	}
	b.Envelope = env
}

// voteBody is the vote on disputeID, signed with k when not nil (the
// rationale trimmed, as the server stores it, and the dispute named),
// bound as signRun's.
func (a *Agent) voteBody(ctx context.Context, k *attest.Key, disputeID, vote, rationale string) dotlab.VoteBody {
	b := dotlab.VoteBody{Vote: vote, Rationale: rationale}
	if k == nil {
		return b
	}
	b.Rationale, b.DisputeID = strings.TrimSpace(rationale), disputeID
	var env *dotlab.Envelope
	var err error
	if bind, ok := a.binding(ctx); ok {
		env, err = attest.SignBoundVote(ctx, k, bind, &b)
	} else {
		env, err = attest.SignVote(ctx, k, &b)
	}
	if err != nil {
		a.logf("%s: voting unsigned: %v", disputeID, err)
		return b
	}
	b.Envelope = env
	return b
}

// CastVote votes on dispute disputeID (POST /disputes/{id}/vote), signed
// when the agent has a key; a signature the server refuses is sent again
// unsigned rather than lose the vote. Review and `dotlab mcp`'s vote tool
// vote through it.
func (a *Agent) CastVote(ctx context.Context, disputeID, vote, rationale string) (*dotlab.Dispute, error) {
	var b dotlab.VoteBody
	d, _, err := postSigned(a, "voting", disputeID, func(k *attest.Key) { b = a.voteBody(ctx, k, disputeID, vote, rationale) },
		func() (*dotlab.Dispute, error) { return a.Client.Vote(ctx, disputeID, b) })
	return d, err
}

// postSigned posts a record signed with the agent's key: sign(k) sets the
// body's envelope for key k (none for nil), post sends it. When the server
// refuses the signature (refusedSignature: the key on file is not the one
// it holds for this agent), the record goes once more unsigned rather
// than be lost (docs/verification.md "Signed records"). key is what the
// record went out signed with (nil: unsigned), for a later resend.
func postSigned[T any](a *Agent, doing, subject string, sign func(k *attest.Key), post func() (T, error)) (v T, key *attest.Key, err error) {
	key = a.Key
	sign(key)
	v, err = post()
	if refusedSignature(err) {
		a.logf("%s: the server refused this agent's signature (%v); %s unsigned", subject, err, doing)
		key = nil
		sign(key)
		v, err = post()
	}
	return v, key, err
}
