package attest_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

func runBody() *dotlab.RunBody {
	return &dotlab.RunBody{JobID: "DL-0001", InputHashes: map[string]string{"data.csv": strings.Repeat("a", 64)},
		OutputHashes: map[string]string{"results.json": strings.Repeat("b", 64)},
		Environment:  dotlab.RunEnvironment{ImageDigest: "sha256:" + strings.Repeat("c", 64)},
		Comparisons:  []dotlab.RunComparison{{Name: "t", Rerun: "4.06212345670000000001"}},
		Outcome:      dotlab.OutcomeReproduced, LogsSHA256: strings.Repeat("d", 64), Notes: "all targets within tolerance"}
}

func mustKey(t testing.TB) *attest.Key {
	t.Helper()
	k, err := attest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func wantInvalid(t *testing.T, err error, says string) {
	t.Helper()
	if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), says) {
		t.Fatalf("got %v; want invalid saying %q", err, says)
	}
}

func TestSignedRunVerifies(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	b := runBody()
	env, err := attest.SignRun(ctx, k, b)
	if err != nil {
		t.Fatal(err)
	}
	b.Envelope = env
	if err := attest.VerifyRun(ctx, k.Public(), attest.Binding{}, b); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	if env.SignedBy() != k.Public().ID || !strings.HasPrefix(k.Public().ID, "SHA256:") {
		t.Fatalf("signed by %q, key %q", env.SignedBy(), k.Public().ID)
	}

	other := mustKey(t)
	wantInvalid(t, attest.VerifyRun(ctx, other.Public(), attest.Binding{}, b), "is signed by key")
	// Another key's signature relabelled with this key's id fails on the signature.
	oenv, _ := attest.SignRun(ctx, other, runBody())
	forged := *b
	forged.Envelope = &dotlab.Envelope{PayloadType: oenv.PayloadType, Payload: oenv.Payload,
		Signatures: []dotlab.Signature{{KeyID: k.Public().ID, Sig: oenv.Signatures[0].Sig}}}
	wantInvalid(t, attest.VerifyRun(ctx, k.Public(), attest.Binding{}, &forged), "signature does not verify")

	// The predicate must be the body, digit for digit.
	changed := *b
	changed.Comparisons = []dotlab.RunComparison{{Name: "t", Rerun: "4.0621234567"}}
	wantInvalid(t, attest.VerifyRun(ctx, k.Public(), attest.Binding{}, &changed), "predicate differs from the body")
	// Signed as a run, it is not a challenge.
	ch := &dotlab.ChallengeBody{RunBody: *b, ClaimID: "DL-0001"}
	wantInvalid(t, attest.VerifyChallenge(ctx, k.Public(), attest.Binding{}, ch), "predicateType")
	// The subjects are what the body pins.
	nologs := *b
	nologs.LogsSHA256 = strings.Repeat("e", 64)
	wantInvalid(t, attest.VerifyRun(ctx, k.Public(), attest.Binding{}, &nologs), "subjects")
}

func TestSignedVoteBindsDispute(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	v := &dotlab.VoteBody{Vote: dotlab.VoteRunner, Rationale: "t differs by 1e-12, inside the tolerance", DisputeID: "DL-0002"}
	env, err := attest.SignVote(ctx, k, v)
	if err != nil {
		t.Fatal(err)
	}
	v.Envelope = env
	if err := attest.VerifyVote(ctx, k.Public(), attest.Binding{}, "DL-0002", v); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, attest.VerifyVote(ctx, k.Public(), attest.Binding{}, "DL-0003", v), "$.dispute_id")
	moved := *v
	moved.DisputeID = "DL-0003"
	wantInvalid(t, attest.VerifyVote(ctx, k.Public(), attest.Binding{}, "DL-0003", &moved), "predicate differs")
}

// TestSignedRunVerifiesOfflineFromEnvelopeAndKey checks a signed run from two
// files alone, the envelope JSON and the authorized_keys line, with the DSSE
// library and ed25519 — no DotLab code on the verifying side but parsing the
// key line's documented format by hand.
func TestSignedRunVerifiesOfflineFromEnvelopeAndKey(t *testing.T) {
	ctx := context.Background()
	k := mustKey(t)
	dir := t.TempDir()
	b := runBody()
	env, err := attest.SignRun(ctx, k, b)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(env)
	os.WriteFile(filepath.Join(dir, "envelope.json"), data, 0o644)
	os.WriteFile(filepath.Join(dir, "key.pub"), []byte(k.Public().Authorized+"\n"), 0o644)

	// The verifier's side.
	var got dsse.Envelope
	raw, _ := os.ReadFile(filepath.Join(dir, "envelope.json"))
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	line, _ := os.ReadFile(filepath.Join(dir, "key.pub"))
	blob, err := base64.StdEncoding.DecodeString(strings.Fields(string(line))[1])
	if err != nil || len(blob) < ed25519.PublicKeySize {
		t.Fatalf("key line: %v", err)
	}
	pub := ed25519.PublicKey(blob[len(blob)-ed25519.PublicKeySize:]) // string "ssh-ed25519", string key
	payload, err := got.DecodeB64Payload()
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := base64.StdEncoding.DecodeString(got.Signatures[0].Sig)
	if !ed25519.Verify(pub, dsse.PAE(got.PayloadType, payload), sig) {
		t.Fatal("signature does not verify offline")
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != attest.PredicateRun || len(st.Subject) != 2 ||
		st.Subject[0].Digest["sha256"] != b.OutputHashes["results.json"] || st.Subject[1].Digest["sha256"] != b.LogsSHA256 {
		t.Fatalf("statement %+v", st)
	}
	if !strings.Contains(string(st.Predicate), `"rerun":4.06212345670000000001`) {
		t.Fatalf("predicate lost the decimal's digits: %s", st.Predicate)
	}
	// And the same files through attest.Open.
	pk, err := attest.ParsePublicKey(string(line))
	if err != nil || pk.ID != k.Public().ID {
		t.Fatalf("parse key: %v %v", pk, err)
	}
	if _, err := attest.Open(ctx, pk, env); err != nil {
		t.Fatal(err)
	}
	// A flipped payload byte breaks it.
	bad := *env
	p, _ := base64.StdEncoding.DecodeString(bad.Payload)
	p[len(p)-2] ^= 1
	bad.Payload = base64.StdEncoding.EncodeToString(p)
	if _, err := attest.Open(ctx, pk, &bad); err == nil {
		t.Fatal("a changed payload verified")
	}
}

func TestKeyFileAndPublicKeyRules(t *testing.T) {
	k := mustKey(t)
	path := filepath.Join(t.TempDir(), "keys", "agent.pem")
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	if err := k.Save(path); err == nil {
		t.Fatal("Save overwrote an existing key")
	}
	back, err := attest.LoadKey(path)
	if err != nil || back.Public().ID != k.Public().ID {
		t.Fatalf("load: %v", err)
	}
	os.Chmod(path, 0o644)
	if _, err := attest.LoadKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key loaded: %v", err)
	}
	for _, bad := range []string{"", "ssh-ed25519", "ssh-ed25519 !!!!", k.Public().Authorized + "\n" + k.Public().Authorized,
		"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDHm0Y1j0x0eO5hC0b9l2Ff5c4a0cD0iL8G3z8qvQ0i2m6b0c6q0l7o3QxHnG2gQ5Z0rZ0u8j1pQ4p0e0Q9l8m2t8d8f1h0k2e0w5b8b0r1h3y0f5n8o8x2n4h7e3c8w9k0m5g6v8d8s7a4w7x7r5m1l5u1m7r8e4y9c2u1m7j6y7s0c5b4r5h8t3u7y1p4q8w8f9g3h0==",
		strings.Repeat("x", 2000)} {
		if _, err := attest.ParsePublicKey(bad); dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(err.Error(), "$.public_key") {
			t.Errorf("%.40q: %v", bad, err)
		}
	}
}

func TestUnsignableRun(t *testing.T) {
	b := runBody()
	b.OutputHashes = nil
	b.LogsSHA256 = ""
	if _, err := attest.SignRun(context.Background(), mustKey(t), b); err == nil {
		t.Fatal("signed a run with no subject")
	}
}
