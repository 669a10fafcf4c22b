package mcpserver

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/internal/lazyre"
)

// screen keeps the agent's key out of what the tools post and return
// (docs/agents.md "Rules the tools enforce"). The server screens every
// public text again with gitleaks' rules (leakcheck, docs/threat-model.md
// "Key leaks in rooms"); this is the agent side's first line, which needs
// no server code: the agent's own key in any spelling that keeps its
// characters (split by spaces, punctuation or case, reversed, rot13,
// base64 or base64url at any alignment, hex), or any piece of such a
// spelling long enough to be the key's alone (pieceLen characters; a key
// posted in halves), any DotLab key, and the unmistakable shapes of common
// tokens and private keys.
type screen struct {
	// pieces are every run of pieceLen characters (hexPieceLen for hex
	// spellings) of the key's normalised spellings (norm).
	pieces map[string]struct{}
}

// pieceLen is the shortest run of a normalised spelling the screen looks
// for: 16 of a key's base64url characters (about 80 bits once case and
// punctuation are dropped) occur in no other text. Hex carries 4 bits a
// character, so its runs are hexPieceLen long.
const (
	pieceLen    = 16
	hexPieceLen = 32
)

// tokenShapes are credential shapes no honest lab text contains.
var tokenShapes = lazyre.New(`dlk_[A-Za-z0-9_-]{43}` +
	`|-----BEGIN [A-Z ]*PRIVATE KEY-----|MC4CAQAwBQYDK2VwBCIEI[A-Za-z0-9+/_-]{20}` +
	`|\b(?:ghp|gho|ghs|ghr|ghu)_[A-Za-z0-9]{36}\b|\bgithub_pat_[A-Za-z0-9_]{50,}` +
	`|\bglpat-[A-Za-z0-9_-]{20}\b|\bxox[abposr]-[A-Za-z0-9-]{10,}` +
	`|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}` +
	`|\bAIza[0-9A-Za-z_-]{35}\b|\bhf_[A-Za-z]{34}\b`)

// newScreen returns the screen of the API key key ("" screens token shapes
// only) and of the agent's signing key, when it has one (nil: none).
func newScreen(key string, signing *attest.Key) *screen {
	s := &screen{pieces: map[string]struct{}{}}
	if signing != nil {
		s.addSigningKey(signing)
	}
	if len(key) < 8 {
		return s
	}
	secret := strings.TrimPrefix(key, "dlk_")
	for _, k := range []string{key, secret} {
		for _, f := range []string{k, reverse(k), rot13(k)} {
			s.add(f, pieceLen)
		}
		for _, f := range base64Spellings([]byte(k)) {
			s.add(f, pieceLen)
		}
		s.add(hex.EncodeToString([]byte(k)), hexPieceLen)
	}
	return s
}

// addSigningKey records the spellings of the private signing key: its
// PKCS #8 DER (the key file's body) and its seed, in base64 at any
// alignment and in hex.
func (s *screen) addSigningKey(k *attest.Key) {
	seed := k.Seed()
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return // an Ed25519 key always marshals
	}
	for _, b := range [][]byte{der, seed} {
		for _, f := range base64Spellings(b) {
			s.add(f, pieceLen)
		}
		s.add(hex.EncodeToString(b), hexPieceLen)
	}
}

// add records every run of n characters of f's normal form (the whole
// form when shorter, if it has at least pieceLen characters).
func (s *screen) add(f string, n int) {
	f = norm(f)
	if len(f) < n {
		if len(f) >= pieceLen {
			s.pieces[f] = struct{}{}
		}
		return
	}
	for i := 0; i+n <= len(f); i++ {
		s.pieces[f[i:i+n]] = struct{}{}
	}
}

// base64Spellings are the base64 texts of b inside a longer text, at each
// of the three alignments: the characters that depend on b's bytes only
// (the alphabet, standard or URL-safe, does not matter once normalised).
func base64Spellings(b []byte) []string {
	var out []string
	for lead := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, lead), b...))
		skip := 0
		if lead > 0 {
			skip = 4 // the first group mixes the text before b with b
		}
		if len(enc) > skip+4 {
			out = append(out, enc[skip:len(enc)-4]) // the last group depends on what follows
		}
	}
	return out
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func rot13(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		}
		return r
	}, s)
}

// norm keeps letters and digits, lower-cased: the spelling of a key that
// survives spaces, punctuation, line breaks and case changes.
func norm(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// hasKey reports whether text holds the agent's key, or a piece of it, in
// one of its spellings.
func (s *screen) hasKey(text string) bool {
	if len(s.pieces) == 0 {
		return false
	}
	n := norm(text)
	for _, w := range []int{pieceLen, hexPieceLen} {
		for i := 0; i+w <= len(n); i++ {
			if _, ok := s.pieces[n[i:i+w]]; ok {
				return true
			}
		}
	}
	return false
}

// check returns a ToolError when text (named what) must not be posted: it
// holds the agent's key or a credential's shape.
func (s *screen) check(what, text string) error {
	if s.hasKey(text) || tokenShapes().MatchString(text) {
		return toolErrorf(ESECRET, what+": looks like an API key, token or private key; nothing was posted. "+
			"Never include keys, tokens or personal data in runs, notes or messages: remove it and post the text without it.")
	}
	return nil
}

// leaks reports whether v, as JSON, holds the agent's key (the last check
// on every answer and notification, redactMiddleware).
func (s *screen) leaks(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	// encoding/json escapes none of a key's characters ([A-Za-z0-9_-]).
	return s.hasKey(string(b))
}
