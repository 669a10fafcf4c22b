package attest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// signStatement signs payload as its own key would: a validly signed
// envelope around whatever statement text a hostile agent chose.
func signStatement(t testing.TB, k *attest.Key, payload []byte) *dotlab.Envelope {
	t.Helper()
	es, err := dsse.NewEnvelopeSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	env, err := es.SignPayload(context.Background(), attest.PayloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	return &dotlab.Envelope{PayloadType: env.PayloadType, Payload: env.Payload,
		Signatures: []dotlab.Signature{{KeyID: env.Signatures[0].KeyID, Sig: env.Signatures[0].Sig}}}
}

// runStatement is the statement of runBody() with predicate pred (JSON text).
func runStatement(pred string) []byte {
	b := runBody()
	return []byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[` +
		`{"name":"results.json","digest":{"sha256":"` + b.OutputHashes["results.json"] + `"}},` +
		`{"name":"logs.jsonl","digest":{"sha256":"` + b.LogsSHA256 + `"}}],` +
		`"predicateType":"` + attest.PredicateRun + `","predicate":` + pred + `}`)
}

// junkPredicate is runBody() as a predicate with about size bytes of
// nested empty lists (30 deep) in made-up fields before it: what a
// registered agent can sign and send to make the server parse.
func junkPredicate(size int) string {
	body, _ := json.Marshal(runBody())
	deep := strings.Repeat("[", 30) + strings.Repeat("]", 30)
	var sb strings.Builder
	for i := 0; sb.Len() < size; i++ {
		fmt.Fprintf(&sb, `"x%d":%s,`, i, deep)
	}
	return `{` + sb.String() + string(body[1:])
}

// TestJunkPredicateRefusedWithoutBuildingIt: a signed envelope whose
// predicate carries fields no body has is refused before anything builds
// the junk. Building it — the in-toto bindings' protobuf Struct made 1-2 s
// of CPU from 700 kB of nested lists — let any registered agent keep the
// server's cores busy with one POST /runs after another, no job needed.
// The bound is on allocations: building the junk makes about 1.9 million;
// skipping it, a few per made-up field name (some 11,000 here).
func TestJunkPredicateRefusedWithoutBuildingIt(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	b := runBody()
	b.Envelope = signStatement(t, k, runStatement(junkPredicate(700_000)))
	var err error
	allocs := testing.AllocsPerRun(1, func() { err = attest.VerifyRun(ctx, k.Public(), attest.Binding{}, b) })
	wantInvalid(t, err, "x0")
	if allocs > 100_000 {
		t.Fatalf("refusing the junk predicate made %.0f allocations; it must be refused before it is built", allocs)
	}
}

// BenchmarkVerifyJunkPredicate: the cost of refusing a signed 700 kB junk
// predicate, beside verifying an honest signed run.
func BenchmarkVerifyJunkPredicate(b *testing.B) {
	ctx := context.Background()
	k := mustKey(b)
	junk := runBody()
	junk.Envelope = signStatement(b, k, runStatement(junkPredicate(700_000)))
	honest := runBody()
	honest.Envelope, _ = attest.SignRun(ctx, k, honest)
	b.Run("junk", func(b *testing.B) {
		for range b.N {
			if attest.VerifyRun(ctx, k.Public(), attest.Binding{}, junk) == nil {
				b.Fatal("junk verified")
			}
		}
	})
	b.Run("honest", func(b *testing.B) {
		for range b.N {
			if err := attest.VerifyRun(ctx, k.Public(), attest.Binding{}, honest); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPredicateReadsOneWayOnly: a predicate another parser would read as a
// different body is refused, though encoding/json reads it as the body:
// a key differing from a field's name only in case ("Outcome"), which
// encoding/json matches to the field and a case-sensitive reader does
// not, and the same field twice in two spellings, of which encoding/json
// keeps the last and others the first. The record would then say one
// thing and its signed statement, to a verifier in another language,
// another.
func TestPredicateReadsOneWayOnly(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	body, _ := json.Marshal(runBody())
	honest := `"outcome":"reproduced"`
	if !strings.Contains(string(body), honest) {
		t.Fatalf("body %s", body)
	}
	for name, spelling := range map[string]string{
		"case":          `"Outcome":"reproduced"`,
		"two spellings": `"outcome":"not_reproduced","OUTCOME":"reproduced"`,
	} {
		b := runBody()
		b.Envelope = signStatement(t, k, runStatement(strings.Replace(string(body), honest, spelling, 1)))
		err := attest.VerifyRun(ctx, k.Public(), attest.Binding{}, b)
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.envelope") {
			t.Errorf("%s: %s verified as the body (%v)", name, spelling, err)
		}
		if _, err := attest.Open(ctx, k.Public(), b.Envelope); err == nil {
			t.Errorf("%s: Open accepted %s", name, spelling)
		}
	}
}

// TestEnvelopeHasOneSpelling: a signed envelope respelled — a line break
// inside the base64 of its payload or signature, which Go's decoder skips —
// is refused: it would verify here while strict base64 decoders (the ones
// docs/verification.md's by-hand check uses) refuse it, and each respelling
// is another envelope, with another digest, for one signature. The URL-safe
// alphabet DSSE allows is accepted when written canonically.
func TestEnvelopeHasOneSpelling(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	b := runBody()
	env, err := attest.SignRun(ctx, k, b)
	if err != nil {
		t.Fatal(err)
	}
	sig := env.Signatures[0]
	for name, respelled := range map[string]dotlab.Envelope{
		"payload line break":   {PayloadType: env.PayloadType, Payload: env.Payload[:8] + "\n" + env.Payload[8:], Signatures: env.Signatures},
		"payload CRLF at end":  {PayloadType: env.PayloadType, Payload: env.Payload + "\r\n", Signatures: env.Signatures},
		"signature line break": {PayloadType: env.PayloadType, Payload: env.Payload, Signatures: []dotlab.Signature{{KeyID: sig.KeyID, Sig: sig.Sig[:8] + "\n" + sig.Sig[8:]}}},
	} {
		rb := runBody()
		rb.Envelope = &respelled
		if err := attest.VerifyRun(ctx, k.Public(), attest.Binding{}, rb); dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "base64") {
			t.Errorf("%s: %v; want refused as not canonical base64", name, err)
		}
	}
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	rawSig, _ := base64.StdEncoding.DecodeString(sig.Sig)
	url := runBody()
	url.Envelope = &dotlab.Envelope{PayloadType: env.PayloadType, Payload: base64.URLEncoding.EncodeToString(payload),
		Signatures: []dotlab.Signature{{KeyID: sig.KeyID, Sig: base64.URLEncoding.EncodeToString(rawSig)}}}
	if err := attest.VerifyRun(ctx, k.Public(), attest.Binding{}, url); err != nil {
		t.Fatalf("URL-safe base64: %v", err)
	}
}

// TestStatementCarriesNothingButTheBody: an envelope is published with its
// record, so nothing in its statement may escape the checks the body gets
// (the secret screen among them): an in-toto subject's other fields (uri,
// annotations, content, downloadLocation …), which the bindings accept,
// are refused, as is any top-level field.
func TestStatementCarriesNothingButTheBody(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	body, _ := json.Marshal(runBody())
	honest := string(runStatement(string(body)))
	for name, statement := range map[string]string{
		"subject uri":         strings.Replace(honest, `{"name":"results.json",`, `{"name":"results.json","uri":"https://x.example/?token=dlk_`+strings.Repeat("A", 43)+`",`, 1),
		"subject annotations": strings.Replace(honest, `{"name":"results.json",`, `{"name":"results.json","annotations":{"note":"unscreened text"},`, 1),
		"subject content":     strings.Replace(honest, `{"name":"results.json",`, `{"name":"results.json","content":"c2VjcmV0",`, 1),
	} {
		b := runBody()
		b.Envelope = signStatement(t, k, []byte(statement))
		if err := attest.VerifyRun(ctx, k.Public(), attest.Binding{}, b); dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.envelope") {
			t.Errorf("%s: %v; want refused", name, err)
		}
		if _, err := attest.Open(ctx, k.Public(), b.Envelope); err == nil {
			t.Errorf("%s: Open accepted it", name)
		}
	}
}
