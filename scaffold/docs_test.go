package scaffold

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// slug is the anchor GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces as -.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// TestFindingSectionsExist: every section a warning of init cites is a
// heading of the how-to, so that the anchors stay stable.
func TestFindingSectionsExist(t *testing.T) {
	data, err := os.ReadFile("../" + HowTo)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllStringSubmatch(string(data), -1) {
		have[slug(m[1])] = true
	}
	cited := []string{SectionMissing}
	for _, s := range findingSection {
		cited = append(cited, s)
	}
	if len(cited) != 5 {
		t.Fatalf("%d sections cited, want 5", len(cited))
	}
	for _, s := range cited {
		if !have[s] {
			t.Errorf("%s#%s: no such heading (headings: %v)", HowTo, s, have)
		}
	}
}
