package attest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"

	"github.com/dotlab/dotlab"
)

// Bound statements (predicate type v2; docs/verification.md "Signed
// records", docs/threat-model.md "Replay and borrowed keys"). A v1
// predicate is the body alone: its signer's statement verifies on any
// server where the signer's key is registered, so the owner of a key could
// post the same signed record on a second server and a verifier there
// could not tell. A v2 predicate names the log the record is made for and
// the agent posting it, beside the body:
//
//	{"log_origin": "<the server's checkpoint origin>", "agent_id": "ag_…", "body": {…the body without envelope…}}
//
// The body already names its claim (a run's job_id, a challenge's claim_id
// or run_id, a vote's dispute_id), so a v2 statement is good for one
// record of one claim, by one agent, in one log; the server also keeps
// every statement's digest (Peeked.StatementSHA256) and refuses a second
// use.

// Binding is what a v2 predicate names beside the body: LogOrigin, the
// origin of the log the record is posted to (the first line of its
// checkpoints; GET /api/v1/status log.origin), and AgentID, the id of the
// posting agent on that server (GET /api/v1/agents/me id).
type Binding struct {
	LogOrigin string `json:"log_origin"`
	AgentID   string `json:"agent_id"`
}

// boundPredicate is a v2 predicate: the binding and the body of a T.
type boundPredicate[T any] struct {
	LogOrigin string `json:"log_origin"`
	AgentID   string `json:"agent_id"`
	Body      *T     `json:"body"`
}

// Record is a kind of signed record: "run", "challenge" or "vote".
type Record string

// The three kinds of signed record.
const (
	RunRecord       Record = "run"
	ChallengeRecord Record = "challenge"
	VoteRecord      Record = "vote"
)

// V1 is the record's v1 predicate type (the body alone).
func (r Record) V1() string { return "https://dotlab.online/attestation/" + string(r) + "/v1" }

// V2 is the record's v2 predicate type (the body bound to a log and an
// agent).
func (r Record) V2() string { return "https://dotlab.online/attestation/" + string(r) + "/v2" }

// SignBoundRun signs b (without its envelope) as a v2 run predicate bound
// to bind. Both of bind's fields are required.
func SignBoundRun(ctx context.Context, k *Key, bind Binding, b *dotlab.RunBody) (*dotlab.Envelope, error) {
	p := *b
	p.Envelope = nil
	return signBound(ctx, k, PredicateRunV2, bind, runSubjects(&p), &p)
}

// SignBoundChallenge signs b as a v2 challenge predicate bound to bind.
func SignBoundChallenge(ctx context.Context, k *Key, bind Binding, b *dotlab.ChallengeBody) (*dotlab.Envelope, error) {
	p := *b
	p.Envelope = nil
	return signBound(ctx, k, PredicateChallengeV2, bind, runSubjects(&p.RunBody), &p)
}

// SignBoundVote signs b as a v2 vote predicate bound to bind; b should name
// its dispute (DisputeID).
func SignBoundVote(ctx context.Context, k *Key, bind Binding, b *dotlab.VoteBody) (*dotlab.Envelope, error) {
	p := *b
	p.Envelope = nil
	return signBound(ctx, k, PredicateVoteV2, bind, voteSubjects(&p), &p)
}

func signBound[T any](ctx context.Context, k *Key, predicateType string, bind Binding, subjects []Subject, body *T) (*dotlab.Envelope, error) {
	if bind.LogOrigin == "" || bind.AgentID == "" {
		return nil, dotlab.Errorf(dotlab.EINVALID, "a bound statement names the log origin and the agent id: got %q and %q", bind.LogOrigin, bind.AgentID)
	}
	return sign(ctx, k, predicateType, subjects, &boundPredicate[T]{LogOrigin: bind.LogOrigin, AgentID: bind.AgentID, Body: body})
}

// Peeked is what an envelope's statement says of itself before its
// signature is checked.
type Peeked struct {
	PredicateType string
	// Binding is a v2 statement's log_origin and agent_id; nil for v1.
	Binding *Binding
	// StatementSHA256 is the SHA-256 (lowercase hex) of the decoded
	// payload, the signed statement's bytes: the statement's identity,
	// whichever base64 alphabet spells it.
	StatementSHA256 string
}

// Bound reports whether the statement is a v2 one (it names a log and an
// agent).
func (p *Peeked) Bound() bool { return p.Binding != nil }

// Peek reads env's statement without checking its signature, for the
// cheap checks before it (Precheck) and for telling a v1 statement from a
// v2 one once VerifyRun and its kin passed: env's form (payload type,
// size, one signature, base64 as an encoder writes it), the predicate
// type, and a v2 predicate's binding. The payload is decoded with
// encoding/json, which skips what it has no field for; VerifyRun and its
// kin decode it strictly. Errors: EINVALID at $.envelope.
func Peek(env *dotlab.Envelope) (*Peeked, error) {
	payload, err := decodePayload(env)
	if err != nil {
		return nil, err
	}
	var st struct {
		PredicateType string `json:"predicateType"`
		Predicate     struct {
			LogOrigin *string `json:"log_origin"`
			AgentID   *string `json:"agent_id"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, invalid("payload is not an in-toto statement: %v", err)
	}
	sum := sha256.Sum256(payload)
	p := &Peeked{PredicateType: st.PredicateType, StatementSHA256: hex.EncodeToString(sum[:])}
	if isV2(st.PredicateType) {
		if st.Predicate.LogOrigin == nil || st.Predicate.AgentID == nil {
			return nil, invalid("predicateType %s binds the body to a log and an agent: the predicate needs \"log_origin\" and \"agent_id\" beside \"body\"", st.PredicateType)
		}
		p.Binding = &Binding{LogOrigin: *st.Predicate.LogOrigin, AgentID: *st.Predicate.AgentID}
	}
	return p, nil
}

func isV2(predicateType string) bool {
	return predicateType == PredicateRunV2 || predicateType == PredicateChallengeV2 || predicateType == PredicateVoteV2
}

// StatementSHA256 is Peeked.StatementSHA256 of env without the other
// checks: the SHA-256 of its decoded payload, ok false when the payload is
// not base64 (no statement to name).
func StatementSHA256(env *dotlab.Envelope) (sum string, ok bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		if b, err := enc.DecodeString(env.Payload); err == nil {
			s := sha256.Sum256(b)
			return hex.EncodeToString(s[:]), true
		}
	}
	return "", false
}

// decodePayload checks env's form as openStatement does, short of the
// signature, and returns the decoded payload.
func decodePayload(env *dotlab.Envelope) ([]byte, error) {
	if err := checkForm(env); err != nil {
		return nil, err
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		if b, err := enc.DecodeString(env.Payload); err == nil && enc.EncodeToString(b) == env.Payload {
			return b, nil
		}
	}
	return nil, invalid("payload and sig must be base64 as an encoder writes it, padded, in one line (standard or URL-safe alphabet): decode and encode again")
}

// Precheck is the cheap part of checking env as the signature of a record
// of kind r posted to the log want.LogOrigin by agent want.AgentID, before
// the signature and the predicate are: Peek, a predicate type of r (v1 or
// v2), and a v2 statement's binding (CheckBinding's rules). It returns the
// peeked statement. Errors: EINVALID at $.envelope, naming the field.
func Precheck(env *dotlab.Envelope, r Record, want Binding) (*Peeked, error) {
	p, err := Peek(env)
	if err != nil {
		return nil, err
	}
	if p.PredicateType != r.V1() && p.PredicateType != r.V2() {
		return nil, invalid("predicateType is %q; a %s's is %q (or %q, which names no log or agent)", p.PredicateType, r, r.V2(), r.V1())
	}
	if p.Bound() {
		if err := bindingMatches(*p.Binding, want); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// CheckBinding holds the binding of payload, a v2 statement, to want: its
// log_origin must be want.LogOrigin (a statement made for another log is a
// replay) and its agent_id want.AgentID (a statement made by another agent
// id is another agent's, or the same key's on another server). A want
// without a log origin (a server keeping no log) takes no v2 statement.
// Errors: EINVALID at $.envelope naming predicate.log_origin or
// predicate.agent_id.
func CheckBinding(payload []byte, want Binding) error {
	var st struct {
		Predicate struct {
			LogOrigin *string `json:"log_origin"`
			AgentID   *string `json:"agent_id"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &st); err != nil || st.Predicate.LogOrigin == nil || st.Predicate.AgentID == nil {
		return invalid("a v2 predicate is {\"log_origin\", \"agent_id\", \"body\"}")
	}
	return bindingMatches(Binding{LogOrigin: *st.Predicate.LogOrigin, AgentID: *st.Predicate.AgentID}, want)
}

func bindingMatches(got, want Binding) error {
	if want.LogOrigin == "" {
		return invalid("predicate.log_origin: this server keeps no log, so nothing can be bound to it: sign with the v1 predicate type, or send the record unsigned")
	}
	if got.LogOrigin != want.LogOrigin {
		return invalid("predicate.log_origin is %q, not %q, the log this record is posted to: the statement was made for another server (a replay); sign the record again for this one (GET /api/v1/status log.origin)", got.LogOrigin, want.LogOrigin)
	}
	if got.AgentID != want.AgentID {
		return invalid("predicate.agent_id is %q, not %q, the agent posting it: sign with your own agent id on this server (GET /api/v1/agents/me)", got.AgentID, want.AgentID)
	}
	return nil
}

// Record is the statement's body and, for a v2 statement, its binding
// (nil for v1): the predicate itself for v1, its "body" for v2.
func (s *Statement) Record() (json.RawMessage, *Binding, error) {
	if !isV2(s.PredicateType) {
		return s.Predicate, nil, nil
	}
	var p boundPredicate[json.RawMessage]
	if err := json.Unmarshal(s.Predicate, &p); err != nil || p.Body == nil {
		return nil, nil, invalid("a v2 predicate is {\"log_origin\", \"agent_id\", \"body\"}")
	}
	return *p.Body, &Binding{LogOrigin: p.LogOrigin, AgentID: p.AgentID}, nil
}
