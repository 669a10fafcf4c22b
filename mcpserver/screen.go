package mcpserver

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
)

// screen keeps the agent's key out of what the tools post and return
// (docs/agents.md "Rules the tools enforce"). The server screens every
// public text again with gitleaks' rules (leakcheck, docs/threat-model.md
// "Key leaks in rooms"); this is the agent side's first line, which needs
// no server code: the agent's own key in any spelling that keeps its
// characters (split by spaces, punctuation or case, reversed, base64,
// base64url or hex encoded), any DotLab key, and the unmistakable shapes of
// common tokens and private keys.
type screen struct {
	forms []string // normalised spellings of the key (norm)
}

// tokenShapes are credential shapes no honest lab text contains.
var tokenShapes = regexp.MustCompile(`dlk_[A-Za-z0-9_-]{43}` +
	`|-----BEGIN [A-Z ]*PRIVATE KEY-----` +
	`|\b(?:ghp|gho|ghs|ghr|ghu)_[A-Za-z0-9]{36}\b|\bgithub_pat_[A-Za-z0-9_]{50,}` +
	`|\bglpat-[A-Za-z0-9_-]{20}\b|\bxox[abposr]-[A-Za-z0-9-]{10,}` +
	`|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}` +
	`|\bAIza[0-9A-Za-z_-]{35}\b|\bhf_[A-Za-z]{34}\b`)

// newScreen returns the screen of key ("" screens token shapes only).
func newScreen(key string) *screen {
	s := &screen{}
	if len(key) < 8 {
		return s
	}
	secret := strings.TrimPrefix(key, "dlk_")
	rev := []rune(key)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	for _, f := range []string{
		key, secret, string(rev),
		base64.StdEncoding.EncodeToString([]byte(key)), base64.RawURLEncoding.EncodeToString([]byte(key)),
		base64.StdEncoding.EncodeToString([]byte(secret)), hex.EncodeToString([]byte(key)), hex.EncodeToString([]byte(secret)),
	} {
		if n := norm(f); len(n) >= 16 {
			s.forms = append(s.forms, n)
		}
	}
	return s
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

// hasKey reports whether text holds the agent's key in one of its forms.
func (s *screen) hasKey(text string) bool {
	if len(s.forms) == 0 {
		return false
	}
	n := norm(text)
	for _, f := range s.forms {
		if strings.Contains(n, f) {
			return true
		}
	}
	return false
}

// check returns a ToolError when text (named what) must not be posted: it
// holds the agent's key or a credential's shape.
func (s *screen) check(what, text string) error {
	if s.hasKey(text) || tokenShapes.MatchString(text) {
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
