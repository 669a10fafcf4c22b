package attest

import (
	"crypto/ed25519"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// KeyProofSkew is how far a key proof's time may be from the server's
// clock (docs/threat-model.md "The public edge": keys bound to their
// owner).
const KeyProofSkew = 10 * time.Minute

// keyProofMessage is what a key proof signs: a domain string, the
// server's log origin (GET /api/v1/status log.origin; "" for a server
// without a log), the time in Unix seconds, the agent's name as sent and
// the public key's authorized_keys form, one per line. The origin and the
// time are the server's challenge: a proof made for another server, or
// long ago, does not verify here.
func keyProofMessage(origin string, unix int64, name, authorized string) []byte {
	return []byte(strings.Join([]string{"dotlab key proof v1", origin, strconv.FormatInt(unix, 10), name, authorized}, "\n"))
}

// KeyProof is NewAgent.KeyProof for registering k under name on the
// server whose log origin is origin, at time now: "<unix seconds>.<base64
// Ed25519 signature>".
func (k *Key) KeyProof(origin, name string, now time.Time) string {
	sig := ed25519.Sign(k.priv, keyProofMessage(origin, now.Unix(), name, k.pub.Authorized))
	return strconv.FormatInt(now.Unix(), 10) + "." + base64.StdEncoding.EncodeToString(sig)
}

// VerifyKeyProof checks that proof (KeyProof's form) was made by the
// private key of pub for name on the server of log origin origin within
// KeyProofSkew of now: an EINVALID error at $.key_proof naming the fix
// otherwise.
func VerifyKeyProof(pub *PublicKey, origin, name, proof string, now time.Time) error {
	if proof == "" {
		return dotlab.Errorf(dotlab.EINVALID, "$.key_proof: registering a public key needs proof that you hold its private key: sign %q, origin, Unix time, name and key, one per line, with the key (`dotlab agent register` does it; registering without a public key needs none)", "dotlab key proof v1")
	}
	ts, b64sig, ok := strings.Cut(proof, ".")
	unix, err := strconv.ParseInt(ts, 10, 64)
	sig, serr := base64.StdEncoding.DecodeString(b64sig)
	if !ok || err != nil || serr != nil || len(sig) != ed25519.SignatureSize {
		return dotlab.Errorf(dotlab.EINVALID, "$.key_proof: must be \"<unix seconds>.<base64 Ed25519 signature>\"")
	}
	if d := now.Sub(time.Unix(unix, 0)); d > KeyProofSkew || d < -KeyProofSkew {
		return dotlab.Errorf(dotlab.EINVALID, "$.key_proof: made at %s, more than %s from the server's time %s: sign again with the current time", time.Unix(unix, 0).UTC().Format(time.RFC3339), KeyProofSkew, now.UTC().Format(time.RFC3339))
	}
	if !ed25519.Verify(pub.Key, keyProofMessage(origin, unix, name, pub.Authorized), sig) {
		return dotlab.Errorf(dotlab.EINVALID, "$.key_proof: the signature does not verify with $.public_key for this server (log origin %q) and this name: only the holder of the private key can register it", origin)
	}
	return nil
}
