// Package leakcheck rejects text that looks like a key or token before it
// is published in a lab room, a run's notes or a challenge's notes
// (docs/threat-model.md "Key leaks in rooms"). Detection is gitleaks'
// (github.com/zricethezav/gitleaks/v8, detect package, its default rule
// set), not a hand-made list of patterns.
//
// Gitleaks is never handed a line longer than MaxLineBytes nor a text
// longer than MaxFragmentBytes (pieces.go): its cost per match grows with
// both, so a long line or a large text would cost quadratic time. Longer
// lines and texts are scanned in overlapping pieces.
//
// Gitleaks sees the text as written and, besides, bounded variants of it
// (variants.go): Unicode NFKC, invisible characters removed, look-alike
// letters of other scripts folded to ASCII (Unicode's confusables table),
// Markdown backslash escapes undone, token pieces joined ("ghp_" + "…",
// "ghp_" . "…", 'ghp_' || '…', ghp_**…**…, ghp_<b></b>…, a token broken
// across lines), and
// base64, hex, percent-encoding, \u escapes and HTML references decoded up
// to MaxDecodeDepth layers. Text is rejected when any variant has a
// finding; the text published is always the original, unchanged.
//
// Ordinary lab talk passes: SHA-256 digests of data files and git commit ids
// are plain lowercase hex with no credential context, which gitleaks' rules
// do not flag (the test corpus in leakcheck_test.go holds both sides).
package leakcheck

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/dotlab/dotlab"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// dotlabRules adds to gitleaks' default rules:
//   - DotLab's own API keys (dlk_ + 43 base64url characters);
//   - credentials in a URL's userinfo (RFC 3986 section 3.2.1,
//     scheme://user:password@host, any scheme, a non-empty password;
//     "user@host" alone is not a finding), except the conventional
//     anonymous FTP logins (ftp:// or ftps:// with user "anonymous" or
//     "ftp", RFC 1635), whose password is by convention no secret;
//   - the same without a scheme, user:password@host, where host looks like
//     a host name (labels and a top-level domain of letters), localhost or
//     an IPv4 address, and user is not a label such as "mailto" or "email"
//     followed by an e-mail address, nor anonymous or ftp;
//   - an Ed25519 private key's PKCS #8 DER, the form a DotLab agent's
//     signing key is stored in (attest.Key.Save), in base64 (a PEM file's
//     body without its header) or hex;
//   - a private key's PEM header followed by key material (64 base64
//     characters), without its footer: a key written on one line with
//     literal \n escapes (JSON) may be longer than a line piece (pieces.go)
//     and cut, and a pasted key is a leak even when truncated.
const dotlabRules = `

[[rules]]
id = "dotlab-api-key"
description = "DotLab API key"
regex = '''dlk_[A-Za-z0-9_-]{43}'''
keywords = ["dlk_"]

[[rules]]
id = "url-userinfo-password"
description = "Password in a URL's userinfo"
regex = '''[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/?#@:]*:[^\s/?#@]+@[^\s/?#@]'''
keywords = ["://"]
[[rules.allowlists]]
description = "anonymous FTP"
regexTarget = "match"
regexes = ['''(?i)^ftps?://(?:anonymous|ftp):''']

[[rules]]
id = "userinfo-password"
description = "user:password@host without a scheme"
regex = '''(?:^|[\s"'(<\[=,;>])[A-Za-z0-9._%+~-]{1,64}:([^\s/?#@:"'<>()\[\]{}]{1,128})@(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}|localhost|[0-9]{1,3}(?:\.[0-9]{1,3}){3})\b'''
secretGroup = 1
keywords = ["@"]
[[rules.allowlists]]
description = "labels before an e-mail address; anonymous FTP"
regexTarget = "match"
regexes = ['''(?i)^[\s"'(<\[=,;>]?(?:mailto|e-?mail|mail|contact|from|to|cc|bcc|reply-to|author|maintainer|sender|by|sips?|xmpp|anonymous|ftp):''']

[[rules]]
id = "private-key-material"
description = "Private key header followed by key material"
regex = '''-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[rn])*[A-Za-z0-9+/]{64}'''
keywords = ["-----begin"]

[[rules]]
id = "ed25519-private-key"
description = "Ed25519 private key as PKCS #8 DER (a DotLab signing key): a PEM body without its header, or hex"
regex = '''MC4CAQAwBQYDK2VwBCIEI[A-Za-z0-9+/_-]{43}|(?i:302e020100300506032b657004220420)[0-9A-Fa-f]{64}'''
keywords = ["MC4CAQAwBQYDK2VwBCIEI", "302e020100300506032b657004220420"]

`

// resetAfter bounds the findings a gitleaks Detector keeps internally: it
// appends every finding to an unexported slice, so a long-lived detector is
// replaced after this many.
const resetAfter = 1000

// Checker checks text for secrets. It is safe for concurrent use.
type Checker struct {
	cfg   config.Config
	folds foldTable
	mu    sync.Mutex
	det   *detect.Detector
}

// New loads gitleaks' default configuration.
func New() (*Checker, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig + dotlabRules + walletRules)); err != nil {
		return nil, fmt.Errorf("gitleaks config: %w", err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return nil, fmt.Errorf("gitleaks config: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return nil, fmt.Errorf("gitleaks config: %w", err)
	}
	// SHA-256 digests and git commit ids are ordinary lab talk, even right
	// after a word like "key" or "token".
	hexIDs := &config.Allowlist{
		Description: "SHA-256 digests and git commit ids",
		Regexes:     []*regexp.Regexp{regexp.MustCompile(`^(?:sha256:)?[0-9a-f]{64}$`), regexp.MustCompile(`^[0-9a-f]{40}$`)},
	}
	if err := hexIDs.Validate(); err != nil {
		return nil, fmt.Errorf("gitleaks allowlist: %w", err)
	}
	cfg.Allowlists = append(cfg.Allowlists, hexIDs)
	dropExampleAllowlists(&cfg)
	return &Checker{cfg: cfg, folds: newFoldTable(), det: detect.NewDetector(cfg)}, nil
}

// dropExampleAllowlists removes, from every rule, allowlist patterns that
// exempt documented example credentials (those containing "example" in any
// case: gitleaks lets AWS's AKIA…EXAMPLE key ids through), and allowlists
// left with nothing to match. A public room must not carry anything shaped
// like a key, example or not.
func dropExampleAllowlists(cfg *config.Config) {
	exampleAllowlist := regexp.MustCompile(`(?i)example`)
	for id, r := range cfg.Rules {
		var kept []*config.Allowlist
		for _, al := range r.Allowlists {
			var res []*regexp.Regexp
			for _, re := range al.Regexes {
				if !exampleAllowlist.MatchString(re.String()) {
					res = append(res, re)
				}
			}
			al.Regexes = res
			if len(al.Regexes)+len(al.StopWords)+len(al.Paths)+len(al.Commits) > 0 {
				kept = append(kept, al)
			}
		}
		r.Allowlists = kept
		cfg.Rules[id] = r
	}
}

func (c *Checker) detector() *detect.Detector {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.det.Findings()) > resetAfter {
		c.det = detect.NewDetector(c.cfg)
	}
	return c.det
}

// Rules returns the ids of the gitleaks rules that match in the first
// piece (pieces.go) of text or of one of its variants (see the package
// doc) that has a finding, sorted; none for clean text. The scan stops
// there: one finding is enough to refuse the text, and a text full of
// findings must not cost more than a clean one. A text whose variants are
// over their bound (VariantBytesPerInputByte) is reported as the single
// pseudo-rule "variant-budget".
func (c *Checker) Rules(text string) []string {
	rules, err := c.rules(text)
	if err != nil {
		return []string{"variant-budget"}
	}
	return rules
}

func (c *Checker) rules(text string) ([]string, error) {
	vs, err := c.folds.variants(text)
	if err != nil {
		return nil, err
	}
	det := c.detector()
	for _, v := range append([]string{text}, vs...) {
		for _, p := range pieces(v) {
			if fs := det.DetectString(p); len(fs) > 0 {
				return ruleIDs(fs), nil
			}
			if id := walletSecret(p); id != "" {
				return []string{id}, nil
			}
		}
	}
	return nil, nil
}

func ruleIDs(fs []report.Finding) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if !seen[f.RuleID] {
			seen[f.RuleID] = true
			out = append(out, f.RuleID)
		}
	}
	sort.Strings(out)
	return out
}

// Check returns nil for clean text, or an EINVALID *dotlab.Error at path
// naming the gitleaks rule that matched (never the matched text itself).
//
// A text whose normalised and decoded variants would pass their bound is
// refused the same way (EINVALID naming the limit), since it could not be
// checked whole.
func (c *Checker) Check(path, text string) error {
	rules, err := c.rules(text)
	if err != nil {
		return dotlab.Errorf(dotlab.EINVALID, "%s: cannot be checked for keys and tokens: %v; post the text without encoded or decorated runs",
			path, err)
	}
	if len(rules) == 0 {
		return nil
	}
	return dotlab.Errorf(dotlab.EINVALID, "%s: looks like a key or token (secret-detection rule %s): remove credentials, tokens and personal data; rooms, runs and challenges are public",
		path, strings.Join(rules, ", "))
}
