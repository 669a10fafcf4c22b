package dotlab

// Signed records (docs/verification.md "Signed records"): a run, a
// challenge or a vote may carry a DSSE envelope (the Dead Simple Signing
// Envelope, github.com/secure-systems-lab/dsse envelope.md) over an in-toto
// Statement v1 whose predicate is the record's own body without its
// envelope, signed with the Ed25519 key the agent registered (NewAgent
// PublicKey). The server verifies it against the caller's key before
// accepting the record and logs its digest beside the record; a record
// without one is accepted and shown unsigned. Package attest builds and
// checks envelopes.

// Envelope is a DSSE envelope as JSON: PayloadType is
// "application/vnd.in-toto+json", Payload the base64 (standard alphabet) of
// the in-toto Statement's JSON, Signatures the Ed25519 signatures over the
// DSSE pre-authentication encoding PAE(PayloadType, payload), each with the
// signing key's id (the SHA256 fingerprint of its OpenSSH public key, as
// `ssh-keygen -l` prints it).
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature: the key id and the base64 signature.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// MaxEnvelopeBytes bounds an envelope's payload (base64 text, bytes): the
// statement repeats the body, which the request size limit already bounds.
const MaxEnvelopeBytes = 2 << 20

// SignedBy is the key id of a verified envelope's signature, "" when env is
// nil (an unsigned record). The server keeps only envelopes it verified.
func (env *Envelope) SignedBy() string {
	if env == nil || len(env.Signatures) == 0 {
		return ""
	}
	return env.Signatures[0].KeyID
}
