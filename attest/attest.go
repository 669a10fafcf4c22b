// Package attest signs and verifies DotLab's signed records
// (docs/verification.md "Signed records"): a run, challenge or vote body as
// the predicate of an in-toto Statement v1 (github.com/in-toto/attestation,
// spec/v1/statement.md), wrapped in a DSSE envelope
// (github.com/secure-systems-lab/dsse, envelope.md and protocol.md) signed
// with the agent's Ed25519 key.
//
// The statement is written and read as JSON with the predicate kept as the
// exact bytes of the body: the in-toto Go bindings hold a predicate as a
// protobuf Struct, whose numbers are doubles, and a body's decimals
// (dotlab.Decimal) must survive digit for digit. The bindings still check
// every statement (attestation/go/v1 Statement.Validate).
//
// The package is agent side and server side: it links neither's packages.
package attest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/strictjson"
	attv1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// The predicate types of DotLab's signed records, as spec/predicate-*.json
// describe them. A v1 predicate is the request body of its route without
// "envelope"; it names no log and no agent, so it verifies wherever its
// signer's key is registered (not replay-protected). A v2 predicate is
// {"log_origin", "agent_id", "body"}: the body bound to one log (the
// server's checkpoint origin) and one agent id there (bound.go).
const (
	PredicateRun       = "https://dotlab.online/attestation/run/v1"       // POST /api/v1/runs body (dotlab.RunBody)
	PredicateChallenge = "https://dotlab.online/attestation/challenge/v1" // POST /api/v1/challenges body (dotlab.ChallengeBody)
	PredicateVote      = "https://dotlab.online/attestation/vote/v1"      // POST /api/v1/disputes/{id}/vote body (dotlab.VoteBody)

	PredicateRunV2       = "https://dotlab.online/attestation/run/v2"       // {log_origin, agent_id, body: dotlab.RunBody}
	PredicateChallengeV2 = "https://dotlab.online/attestation/challenge/v2" // {log_origin, agent_id, body: dotlab.ChallengeBody}
	PredicateVoteV2      = "https://dotlab.online/attestation/vote/v2"      // {log_origin, agent_id, body: dotlab.VoteBody}
)

// Subject names: the files a run or challenge statement is about, and the
// text a vote's is.
const (
	SubjectResults   = "results.json" // the analysis's results.json (output_hashes["results.json"])
	SubjectLogs      = "logs.jsonl"   // the run's logs (logs_sha256)
	SubjectRationale = "rationale.txt"
)

// Statement is an in-toto Statement v1 with its predicate as raw JSON.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject is an in-toto ResourceDescriptor naming a file by its digest.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

func subject(name, sha string) Subject {
	return Subject{Name: name, Digest: map[string]string{"sha256": sha}}
}

// runSubjects are results.json and logs.jsonl, each when the body pins it.
func runSubjects(b *dotlab.RunBody) []Subject {
	var out []Subject
	if h := b.OutputHashes[SubjectResults]; h != "" {
		out = append(out, subject(SubjectResults, h))
	}
	if b.LogsSHA256 != "" {
		out = append(out, subject(SubjectLogs, b.LogsSHA256))
	}
	return out
}

func voteSubjects(b *dotlab.VoteBody) []Subject {
	sum := sha256.Sum256([]byte(b.Rationale))
	return []Subject{subject(SubjectRationale, hex.EncodeToString(sum[:]))}
}

// SignRun signs b (without its envelope) as a run predicate. A body that
// pins neither results.json nor logs has no subject and cannot be signed.
func SignRun(ctx context.Context, k *Key, b *dotlab.RunBody) (*dotlab.Envelope, error) {
	p := *b
	p.Envelope = nil
	return sign(ctx, k, PredicateRun, runSubjects(&p), &p)
}

// SignChallenge signs b (without its envelope) as a challenge predicate.
func SignChallenge(ctx context.Context, k *Key, b *dotlab.ChallengeBody) (*dotlab.Envelope, error) {
	p := *b
	p.Envelope = nil
	return sign(ctx, k, PredicateChallenge, runSubjects(&p.RunBody), &p)
}

// SignVote signs b (without its envelope) as a vote predicate; b should
// name its dispute (DisputeID) so the signature binds it.
func SignVote(ctx context.Context, k *Key, b *dotlab.VoteBody) (*dotlab.Envelope, error) {
	p := *b
	p.Envelope = nil
	return sign(ctx, k, PredicateVote, voteSubjects(&p), &p)
}

func sign(ctx context.Context, k *Key, predicateType string, subjects []Subject, predicate any) (*dotlab.Envelope, error) {
	if len(subjects) == 0 {
		return nil, fmt.Errorf("nothing to sign: the body pins neither %s nor %s", SubjectResults, SubjectLogs)
	}
	pred, err := json.Marshal(predicate)
	if err != nil {
		return nil, fmt.Errorf("encode predicate: %w", err)
	}
	payload, err := json.Marshal(Statement{Type: attv1.StatementTypeUri, Subject: subjects, PredicateType: predicateType, Predicate: pred})
	if err != nil {
		return nil, fmt.Errorf("encode statement: %w", err)
	}
	es, err := dsse.NewEnvelopeSigner(k)
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	out := &dotlab.Envelope{PayloadType: env.PayloadType, Payload: env.Payload}
	for _, s := range env.Signatures {
		out.Signatures = append(out.Signatures, dotlab.Signature{KeyID: s.KeyID, Sig: s.Sig})
	}
	return out, nil
}

// Open checks env offline against the public key alone: one signature, by
// pub, over DSSE's PAE of an in-toto statement v1 that the in-toto bindings
// accept, whose predicate is one of DotLab's records (a run, challenge or
// vote body, v1 or v2, decoded strictly). It returns the statement
// (Statement.Record reads its body and binding). It checks no binding:
// VerifyRun and its kin do. Errors name what failed, at $.envelope.
func Open(ctx context.Context, pub *PublicKey, env *dotlab.Envelope) (*Statement, error) {
	payload, st, err := openStatement(ctx, pub, env)
	if err != nil {
		return nil, err
	}
	switch st.PredicateType {
	case PredicateRun:
		_, err = decodePredicate[dotlab.RunBody](payload, nil)
	case PredicateChallenge:
		_, err = decodePredicate[dotlab.ChallengeBody](payload, nil)
	case PredicateVote:
		_, err = decodePredicate[dotlab.VoteBody](payload, nil)
	case PredicateRunV2:
		_, err = decodePredicate[boundPredicate[dotlab.RunBody]](payload, nil)
	case PredicateChallengeV2:
		_, err = decodePredicate[boundPredicate[dotlab.ChallengeBody]](payload, nil)
	case PredicateVoteV2:
		_, err = decodePredicate[boundPredicate[dotlab.VoteBody]](payload, nil)
	default:
		err = invalid("predicateType is %q, none of DotLab's records' (%s, %s, %s, or their /v2)", st.PredicateType, PredicateRun, PredicateChallenge, PredicateVote)
	}
	if err != nil {
		return nil, err
	}
	if err := checkBindings(payload); err != nil {
		return nil, err
	}
	return st, nil
}

// openStatement checks env's form and its one signature, by pub, and reads
// the statement's top level (the predicate left as its bytes).
func openStatement(ctx context.Context, pub *PublicKey, env *dotlab.Envelope) ([]byte, *Statement, error) {
	if err := checkForm(env); err != nil {
		return nil, nil, err
	}
	if got := env.Signatures[0].KeyID; got != pub.ID {
		return nil, nil, invalid("is signed by key %q, not by %s (the key registered for this agent)", got, pub.ID)
	}
	if !canonicalBase64(env.Payload) || !canonicalBase64(env.Signatures[0].Sig) {
		return nil, nil, invalid("payload and sig must be base64 as an encoder writes it, padded, in one line (standard or URL-safe alphabet): decode and encode again")
	}
	ev, err := dsse.NewEnvelopeVerifier(verifier{pub})
	if err != nil {
		return nil, nil, err
	}
	d := &dsse.Envelope{PayloadType: env.PayloadType, Payload: env.Payload,
		Signatures: []dsse.Signature{{KeyID: env.Signatures[0].KeyID, Sig: env.Signatures[0].Sig}}}
	_, payload, err := ev.VerifyAndDecode(ctx, d)
	if err != nil {
		return nil, nil, invalid("signature does not verify with key %s", pub.ID)
	}
	var st Statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, nil, invalid("payload is not an in-toto statement: %v", err)
	}
	if st.Type != attv1.StatementTypeUri {
		return nil, nil, invalid("statement _type is %q; want %q", st.Type, attv1.StatementTypeUri)
	}
	return payload, &st, nil
}

// checkForm checks env's form short of its base64: present, the in-toto
// payload type, the size bound, one signature.
func checkForm(env *dotlab.Envelope) error {
	if env == nil {
		return invalid("is missing")
	}
	if env.PayloadType != PayloadType {
		return invalid("payloadType is %q; want %q", env.PayloadType, PayloadType)
	}
	if len(env.Payload) > dotlab.MaxEnvelopeBytes {
		return invalid("payload is %d bytes; at most %d", len(env.Payload), dotlab.MaxEnvelopeBytes)
	}
	if len(env.Signatures) != 1 {
		return invalid("carries %d signatures; sign with exactly one key, your registered one", len(env.Signatures))
	}
	return nil
}

// canonicalBase64 reports whether s is the padded base64 (standard or
// URL-safe alphabet) an encoder writes of its bytes: Go's decoders skip
// line breaks, which strict decoders refuse, and each such respelling of
// one signature would be another envelope with another digest.
func canonicalBase64(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && enc.EncodeToString(b) == s {
			return true
		}
	}
	return false
}

// typedStatement is a statement whose predicate is a T.
type typedStatement[T any] struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     *T        `json:"predicate"`
}

// predicateLimits bound the strict decoding of a statement.
var predicateLimits = strictjson.Limits{MaxBytes: dotlab.MaxEnvelopeBytes, MaxDepth: 32}

// decodePredicate decodes payload, a signed statement, as a statement whose
// predicate is a T, and, when want is not nil, holds the predicate to it
// field for field. Nothing a statement or a body has no field for is built:
// a first pass decodes into the typed statement, refusing unknown fields
// while skipping their values, and compares with want; only then does
// strictjson decode it again to refuse what encoding/json lets through
// (duplicate keys, keys differing from a field's name only in case,
// invalid UTF-8), so that no parser reads a different body from it.
func decodePredicate[T any](payload []byte, want *T) (*T, error) {
	var fast typedStatement[T]
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fast); err != nil {
		return nil, invalid("predicate is not this record's body: %v", err)
	}
	if fast.Predicate == nil {
		return nil, invalid("the statement has no predicate: the predicate is the body, without \"envelope\"")
	}
	if want != nil && !sameJSON(fast.Predicate, want) {
		return nil, errDiffers
	}
	var strict typedStatement[T]
	if err := strictjson.DecodeLimits(payload, predicateLimits, &strict); err != nil {
		return nil, invalid("payload: %v", err)
	}
	if want != nil && !sameJSON(strict.Predicate, want) {
		return nil, errDiffers
	}
	return strict.Predicate, nil
}

var errDiffers = invalid("predicate differs from the body: sign exactly the body you send, without \"envelope\"")

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// checkBindings has the in-toto Go bindings check the statement
// (attestation/go/v1 Statement.Validate).
func checkBindings(payload []byte) error {
	var pb attv1.Statement
	if err := protojson.Unmarshal(payload, &pb); err != nil {
		return invalid("payload is not an in-toto statement: %v", err)
	}
	if err := pb.Validate(); err != nil {
		return invalid("payload is not a valid in-toto statement v1: %v", err)
	}
	return nil
}

// VerifyRun checks that b.Envelope is pub's signature of b (without its
// envelope) as a run: Open, a run predicate type, the subjects b pins and
// a predicate equal to b field for field, decimals digit for digit. A v2
// statement must name want (the log the record is posted to and the agent
// posting it; CheckBinding); a v1 statement names neither and is not
// held to want (Peek tells which one env is). Errors: EINVALID at
// $.envelope.
func VerifyRun(ctx context.Context, pub *PublicKey, want Binding, b *dotlab.RunBody) error {
	p := *b
	p.Envelope = nil
	return verify(ctx, pub, b.Envelope, RunRecord, want, runSubjects(&p), &p)
}

// VerifyChallenge is VerifyRun for a challenge body.
func VerifyChallenge(ctx context.Context, pub *PublicKey, want Binding, b *dotlab.ChallengeBody) error {
	p := *b
	p.Envelope = nil
	return verify(ctx, pub, b.Envelope, ChallengeRecord, want, runSubjects(&p.RunBody), &p)
}

// VerifyVote is VerifyRun for a vote body on dispute disputeID, which the
// body must name.
func VerifyVote(ctx context.Context, pub *PublicKey, want Binding, disputeID string, b *dotlab.VoteBody) error {
	if b.DisputeID != disputeID {
		return dotlab.Errorf(dotlab.EINVALID, "$.dispute_id: a signed vote names its dispute: give \"dispute_id\": %q in the body and in the signed predicate", disputeID)
	}
	p := *b
	p.Envelope = nil
	return verify(ctx, pub, b.Envelope, VoteRecord, want, voteSubjects(&p), &p)
}

// verify checks env as the signature of body, cheapest checks first: the
// signature, the predicate type, the subjects, a v2 statement's binding,
// the predicate against the body (and, for v2, against want), and last the
// in-toto bindings, so that what a signer made up costs the server no more
// than the body it sent.
func verify[T any](ctx context.Context, pub *PublicKey, env *dotlab.Envelope, r Record, want Binding, subjects []Subject, body *T) error {
	payload, st, err := openStatement(ctx, pub, env)
	if err != nil {
		return err
	}
	if st.PredicateType != r.V1() && st.PredicateType != r.V2() {
		return invalid("predicateType is %q; this record's is %q (or %q, which names no log or agent)", st.PredicateType, r.V2(), r.V1())
	}
	if !slices.EqualFunc(st.Subject, subjects, sameSubject) {
		return invalid("subjects %s differ from what the body pins: %s", names(st.Subject), names(subjects))
	}
	if st.PredicateType == r.V1() {
		_, err = decodePredicate(payload, body)
	} else {
		if err := CheckBinding(payload, want); err != nil {
			return err
		}
		_, err = decodePredicate(payload, &boundPredicate[T]{LogOrigin: want.LogOrigin, AgentID: want.AgentID, Body: body})
	}
	if err != nil {
		return err
	}
	return checkBindings(payload)
}

func sameSubject(a, b Subject) bool {
	return a.Name == b.Name && len(a.Digest) == 1 && a.Digest["sha256"] == b.Digest["sha256"]
}

func names(ss []Subject) string {
	out := "["
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s.Name + " sha256:" + s.Digest["sha256"]
	}
	return out + "]"
}

func invalid(format string, args ...any) error {
	return dotlab.Errorf(dotlab.EINVALID, "$.envelope: "+format, args...)
}
