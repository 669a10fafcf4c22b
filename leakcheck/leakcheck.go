// Package leakcheck rejects text that looks like a key or token before it
// is published in a lab room, a run's notes or a challenge's notes
// (agent-skill-dotlab.txt "Core rules" 2: "Messages that look like keys are
// rejected"). Detection is gitleaks' (github.com/zricethezav/gitleaks/v8,
// detect package, its default rule set), not a hand-made list of patterns.
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

// dotlabRules adds DotLab's own API keys (dlk_ + 43 base64url characters)
// to gitleaks' default rules.
const dotlabRules = `

[[rules]]
id = "dotlab-api-key"
description = "DotLab API key"
regex = '''dlk_[A-Za-z0-9_-]{43}'''
keywords = ["dlk_"]

`

// resetAfter bounds the findings a gitleaks Detector keeps internally: it
// appends every finding to an unexported slice, so a long-lived detector is
// replaced after this many.
const resetAfter = 1000

// Checker checks text for secrets. It is safe for concurrent use.
type Checker struct {
	cfg config.Config
	mu  sync.Mutex
	det *detect.Detector
}

// New loads gitleaks' default configuration.
func New() (*Checker, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig + dotlabRules)); err != nil {
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
	return &Checker{cfg: cfg, det: detect.NewDetector(cfg)}, nil
}

func (c *Checker) detector() *detect.Detector {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.det.Findings()) > resetAfter {
		c.det = detect.NewDetector(c.cfg)
	}
	return c.det
}

// Rules returns the ids of gitleaks rules that match text, sorted; none for
// clean text.
func (c *Checker) Rules(text string) []string {
	findings := c.detector().DetectString(text)
	return ruleIDs(findings)
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
func (c *Checker) Check(path, text string) error {
	rules := c.Rules(text)
	if len(rules) == 0 {
		return nil
	}
	return dotlab.Errorf(dotlab.EINVALID, "%s: looks like a key or token (secret-detection rule %s): remove credentials, tokens and personal data; rooms, runs and challenges are public",
		path, strings.Join(rules, ", "))
}
