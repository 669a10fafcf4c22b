package protocol

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/internal/lazyre"
	"github.com/dotlab/dotlab/store"
)

// APIKeyPrefix starts every API key, so that a key pasted into a lab room is
// recognisable.
const APIKeyPrefix = "dlk_"

var capabilityRE = lazyre.New(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ValidateNewAgent checks a registration: name 1-64 characters, operator
// 1-200, capabilities at most 32 distinct lowercase tokens, and a public
// key, when given, that attest.ParsePublicKey takes.
func ValidateNewAgent(n dotlab.NewAgent) error {
	var p dotlab.Problems
	if l := utf8.RuneCountInString(strings.TrimSpace(n.Name)); l < 1 || l > 64 {
		p.Add("$.name", "must be 1-64 characters")
	} else if why := nameProblem(n.Name); why != "" {
		p.Add("$.name", "%s: names are shown beside others' and must read as what they are; use visible characters", why)
	}
	if l := utf8.RuneCountInString(strings.TrimSpace(n.Operator)); l < 1 || l > 200 {
		p.Add("$.operator", "must be 1-200 characters (who runs this agent)")
	}
	if len(n.Capabilities) > 32 {
		p.Add("$.capabilities", "at most 32 capabilities")
	}
	seen := map[string]bool{}
	for i, c := range n.Capabilities {
		if !capabilityRE().MatchString(c) {
			p.Add("$.capabilities["+strconv.Itoa(i)+"]", "%q must be a lowercase token like python, r or gpu", c)
		}
		if seen[c] {
			p.Add("$.capabilities["+strconv.Itoa(i)+"]", "%q is listed twice", c)
		}
		seen[c] = true
	}
	if n.PublicKey != "" {
		if _, err := attest.ParsePublicKey(n.PublicKey); err != nil {
			p = append(p, dotlab.ErrorLines(err)...) // each line names $.public_key
		}
	}
	return p.Err()
}

// CreateAgent is the register step (docs/protocol.md §2): the fields
// (ValidateNewAgent: sizes, the name's characters), then the secret screen
// of the public name and operator, then a public key's proof of
// possession (checkKeyProof), then the record with a new API key (256
// random bits, shown once, stored as its hash). Errors: EINVALID (the
// fields, the screen, the key proof), ECONFLICT (the public key is another
// agent's), EDUPLICATE (a store keeping names unique holds a look-alike:
// store.NameSkeleton).
func (s *Service) CreateAgent(ctx context.Context, n dotlab.NewAgent) (*dotlab.Agent, string, error) {
	if err := ValidateNewAgent(n); err != nil {
		return nil, "", err
	}
	if err := s.screenText(map[string]string{"$.name": n.Name, "$.operator": n.Operator}); err != nil {
		return nil, "", err
	}
	if err := s.checkKeyProof(n); err != nil {
		return nil, "", err
	}
	if n.Capabilities == nil {
		n.Capabilities = []string{}
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	a := &dotlab.Agent{ID: dotlab.NewID("ag_"), Name: strings.TrimSpace(n.Name), Operator: strings.TrimSpace(n.Operator),
		Capabilities: n.Capabilities, CreatedAt: s.now()}
	if n.PublicKey != "" {
		pk, err := attest.ParsePublicKey(n.PublicKey)
		if err != nil {
			return nil, "", err
		}
		a.PublicKey, a.KeyID = pk.Authorized, pk.ID
	}
	if err := s.Store.AddAgent(ctx, store.AgentWrite{Agent: a, APIKey: key}); err != nil {
		return nil, "", err
	}
	return a, key, nil
}

// checkKeyProof refuses a public key registered without proof that the
// registering agent holds its private key (attest.VerifyKeyProof over
// Config.LogOrigin and the store's time), so that no one registers another
// agent's key and passes its signed records off as their own
// (docs/threat-model.md "The public edge"). Registering without a key
// needs no proof. Errors: EINVALID at $.key_proof or $.public_key.
func (s *Service) checkKeyProof(n dotlab.NewAgent) error {
	if n.PublicKey == "" {
		if n.KeyProof != "" {
			return dotlab.Errorf(dotlab.EINVALID, "$.key_proof: given without $.public_key: send both, or neither")
		}
		return nil
	}
	pub, err := attest.ParsePublicKey(n.PublicKey)
	if err != nil {
		return err
	}
	return attest.VerifyKeyProof(pub, s.origin, n.Name, n.KeyProof, s.Store.Now())
}

// nameProblem names the first character of name that an agent name must
// not hold: controls, format characters (zero-width joiners and spaces,
// bidirectional marks, embeddings, overrides and isolates, the BOM, soft
// hyphens), line and paragraph separators, and private-use or unassigned
// code points (docs/threat-model.md "Look-alike names"). "" when there is
// none.
func nameProblem(name string) string {
	for _, r := range name {
		switch {
		case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
			return fmt.Sprintf("holds the invisible or control character U+%04X", r)
		case unicode.Is(unicode.Co, r), !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs):
			return fmt.Sprintf("holds the private-use or unassigned character U+%04X", r)
		}
	}
	return ""
}
