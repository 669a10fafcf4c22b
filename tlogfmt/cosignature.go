package tlogfmt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// CosignatureV1 is the signature type byte of an Ed25519 cosignature/v1
// verifier key (c2sp.org/tlog-cosignature): a witness's key is written
// "<name>+<key id, 8 hex>+<base64(0x04 || Ed25519 public key)>", the key id
// being SHA-256(name || "\n" || 0x04 || public key)[:4].
const CosignatureV1 = 0x04

// cosignatureSigSize is a cosignature/v1 signature after its key id: the
// 8-byte big-endian timestamp and the 64-byte Ed25519 signature.
const cosignatureSigSize = 8 + ed25519.SignatureSize

// CosignatureVerifier is a note.Verifier of one witness's Ed25519
// cosignature/v1 signatures: Verify(text, sig) checks sig (timestamp ‖
// signature) over "cosignature/v1\ntime <timestamp>\n" + text, the note
// text of the cosigned checkpoint. Pass it to note.Open with the log's
// verifier; the cosignature lines it verifies are in Note.Sigs.
type CosignatureVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	vkey string
}

// NewCosignatureVerifier parses a witness's cosignature/v1 verifier key. It
// fails naming what is wrong: not three '+'-separated parts, a name with
// spaces or '+', a key that is not 0x04 ‖ 32 bytes, a key id that is not
// the key's.
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || name == "" || strings.ContainsAny(name, " \t\n+") || len(hash16) != 8 {
		return nil, fmt.Errorf("witness key %q: want <name>+<key id, 8 hex>+<base64 key>", vkey)
	}
	h, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil {
		return nil, fmt.Errorf("witness key %q: the key id %q is not 8 hex digits", vkey, hash16)
	}
	key, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(key) != 1+ed25519.PublicKeySize || key[0] != CosignatureV1 {
		return nil, fmt.Errorf("witness key %q: the key must be base64 of 0x04 (cosignature/v1) and a 32-byte Ed25519 public key", vkey)
	}
	pub := ed25519.PublicKey(key[1:])
	if uint32(h) != cosignatureKeyID(name, pub) {
		return nil, fmt.Errorf("witness key %q: the key id %s is not this key's (SHA-256 of name, newline, 0x04 and key)", vkey, hash16)
	}
	return &CosignatureVerifier{name: name, hash: uint32(h), pub: pub, vkey: vkey}, nil
}

// CosignatureVerifierKey is the cosignature/v1 verifier key of a witness
// named name with Ed25519 public key pub.
func CosignatureVerifierKey(name string, pub ed25519.PublicKey) string {
	return fmt.Sprintf("%s+%08x+%s", name, cosignatureKeyID(name, pub), base64.StdEncoding.EncodeToString(append([]byte{CosignatureV1}, pub...)))
}

func cosignatureKeyID(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{CosignatureV1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Name is the witness's name (the key's name).
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash is the key id of the witness's cosignature/v1 key.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// Key is the verifier key as given.
func (v *CosignatureVerifier) Key() string { return v.vkey }

// Verify reports whether sig (the signature after its key id) is a valid
// cosignature/v1 of the checkpoint note text msg.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != cosignatureSigSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig[:8])
	if ts > math.MaxInt64 {
		return false
	}
	return ed25519.Verify(v.pub, CosignedMessage(msg, ts), sig[8:])
}

// CosignedMessage is what a cosignature/v1 signs: "cosignature/v1\n",
// "time <timestamp>\n", then the checkpoint's note text.
func CosignedMessage(text []byte, timestamp uint64) []byte {
	return append([]byte("cosignature/v1\ntime "+strconv.FormatUint(timestamp, 10)+"\n"), text...)
}

// CosignatureTime is the timestamp of a cosignature/v1 signature line's
// base64 (Note.Sigs[i].Base64: key id, timestamp, signature).
func CosignatureTime(b64 string) (time.Time, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 4+cosignatureSigSize {
		return time.Time{}, errors.New("cosignature: not the base64 of a key id, a timestamp and an Ed25519 signature")
	}
	ts := binary.BigEndian.Uint64(raw[4:12])
	if ts > math.MaxInt64 {
		return time.Time{}, errors.New("cosignature: timestamp past 2^63-1")
	}
	return time.Unix(int64(ts), 0).UTC(), nil
}

// Check reports whether sig, a signature line of a note whose text is
// text, is this witness's valid cosignature, and its timestamp. A line of
// another key (name or key id) is not this witness's.
func (v *CosignatureVerifier) Check(text string, sig note.Signature) (time.Time, bool) {
	if sig.Name != v.name || sig.Hash != v.hash {
		return time.Time{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(sig.Base64)
	if err != nil || len(raw) < 4 || !v.Verify([]byte(text), raw[4:]) {
		return time.Time{}, false
	}
	at, err := CosignatureTime(sig.Base64)
	return at, err == nil
}

// SignatureLines parses note signature lines ("— <name> <base64>\n", each
// ending in a newline), as a witness answers add-checkpoint. It fails on
// any other line.
func SignatureLines(lines string) ([]note.Signature, error) {
	if lines == "" || !strings.HasSuffix(lines, "\n") {
		return nil, errors.New("signature lines: none, or the last does not end in a newline")
	}
	var out []note.Signature
	for _, line := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		rest, ok := strings.CutPrefix(line, "— ")
		name, b64, ok2 := strings.Cut(rest, " ")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if !ok || !ok2 || name == "" || err != nil || len(raw) < 5 {
			return nil, fmt.Errorf("signature line %q: want \"— <name> <base64 of key id and signature>\"", line)
		}
		out = append(out, note.Signature{Name: name, Hash: binary.BigEndian.Uint32(raw), Base64: b64})
	}
	return out, nil
}

var _ note.Verifier = (*CosignatureVerifier)(nil)
