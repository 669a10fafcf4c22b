package attest

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/safefs"
	"golang.org/x/crypto/ssh"
)

// Key is an agent's Ed25519 signing key. It is a dsse.Signer: Sign signs
// with Ed25519 (RFC 8032; no pre-hash), KeyID is the public key's SHA256
// fingerprint.
type Key struct {
	priv ed25519.PrivateKey
	pub  *PublicKey
}

// PublicKey is an agent's registered verification key: the raw Ed25519
// key, its OpenSSH authorized_keys form and its id, the SHA256 fingerprint
// of that form ("SHA256:" + unpadded base64, as `ssh-keygen -l` prints).
type PublicKey struct {
	Key        ed25519.PublicKey
	Authorized string
	ID         string
}

func newPublicKey(k ed25519.PublicKey) (*PublicKey, error) {
	sk, err := ssh.NewPublicKey(k)
	if err != nil {
		return nil, err
	}
	return &PublicKey{Key: k, Authorized: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sk))), ID: ssh.FingerprintSHA256(sk)}, nil
}

// MaxPublicKeyBytes bounds the public_key text of a registration.
const MaxPublicKeyBytes = 1024

// ParsePublicKey reads an OpenSSH authorized_keys line ("ssh-ed25519
// AAAA… [comment]"); only Ed25519 keys are accepted. Errors: EINVALID at
// $.public_key.
func ParsePublicKey(text string) (*PublicKey, error) {
	if len(text) > MaxPublicKeyBytes {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.public_key: is %d bytes; an ssh-ed25519 key is under 100", len(text))
	}
	sk, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(text))
	if err != nil || len(strings.TrimSpace(string(rest))) > 0 {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.public_key: must be one OpenSSH public key line, \"ssh-ed25519 AAAA…\" (`dotlab agent register` makes one)")
	}
	ck, ok := sk.(ssh.CryptoPublicKey)
	if !ok || sk.Type() != ssh.KeyAlgoED25519 {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.public_key: is a %s key; DotLab verifies Ed25519 only (ssh-ed25519)", sk.Type())
	}
	edk, ok := ck.CryptoPublicKey().(ed25519.PublicKey)
	if !ok {
		return nil, dotlab.Errorf(dotlab.EINVALID, "$.public_key: not an Ed25519 key")
	}
	return newPublicKey(edk)
}

// GenerateKey makes a new Ed25519 key from crypto/rand.
func GenerateKey() (*Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	pk, err := newPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return &Key{priv: priv, pub: pk}, nil
}

// Seed is the private key itself, its 32-byte RFC 8032 seed, for the agent
// side's secret screen (which refuses texts holding it in any spelling):
// never print, log or post it.
func (k *Key) Seed() []byte { return k.priv.Seed() }

// Public is the key's public half.
func (k *Key) Public() *PublicKey { return k.pub }

// Sign implements dsse.Signer.
func (k *Key) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(k.priv, data), nil
}

// KeyID implements dsse.Signer.
func (k *Key) KeyID() (string, error) { return k.pub.ID, nil }

// verifier is a dsse.Verifier for one public key.
type verifier struct{ pub *PublicKey }

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub.Key, data, sig) {
		return errors.New("bad signature")
	}
	return nil
}
func (v verifier) KeyID() (string, error)   { return v.pub.ID, nil }
func (v verifier) Public() crypto.PublicKey { return v.pub.Key }

// pemType is the PEM block type of a stored key: PKCS #8 (RFC 5208/5958).
const pemType = "PRIVATE KEY"

// Save writes the private key as a PKCS #8 PEM file at path with mode 0600
// (its directory 0700), atomically; an existing file is not overwritten.
func (k *Key) Save(path string) error {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return err
	}
	return safefs.WritePrivate(path, pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der}), false)
}

// LoadKey reads a key written by Save. It refuses a file that group or
// others may read (as ssh does), and anything but one Ed25519 PKCS #8 key.
func LoadKey(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: signing key is readable by others (mode %v): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != pemType {
		return nil, fmt.Errorf("%s: not a PEM %q block", path, pemType)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	pk, err := newPublicKey(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return &Key{priv: priv, pub: pk}, nil
}
