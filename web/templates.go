package web

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"home", "claims", "claim", "run", "lab", "agent", "docs", "doc", "error"}

func parseTemplates() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(pageNames))
	for _, n := range pageNames {
		t, err := template.New(n).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}

// fingerprint hashes every asset, so pages can ask for /assets/x?v=HASH
// and browsers may cache it for good.
func fingerprint(assets fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12], err
}

var funcs = template.FuncMap{
	// sealedCommitted counts the seats of a sealed round that committed.
	"sealedCommitted": func(votes []dotlab.SealedVote) int {
		n := 0
		for _, v := range votes {
			if v.CommittedAt != nil {
				n++
			}
		}
		return n
	},
	// iso renders a time for <time datetime>; the script shows it in the
	// reader's zone, the text without scripts is UTC.
	"iso": func(t any) string {
		if tt, ok := asTime(t); ok {
			return tt.UTC().Format(time.RFC3339)
		}
		return ""
	},
	"utc": func(t any) string {
		if tt, ok := asTime(t); ok {
			return tt.UTC().Format("2006-01-02 15:04 UTC")
		}
		return ""
	},
	"has": func(t any) bool { _, ok := asTime(t); return ok },
	// hasSources says whether any target reads its number from a source
	// (a stream or a file) rather than results.json.
	"hasSources": func(ts []dotlab.Target) bool {
		for _, t := range ts {
			if t.Source != nil {
				return true
			}
		}
		return false
	},
	// relative says "in 3 h 20 min" or "2 d ago" from now to t.
	"relative": func(now time.Time, t any) string {
		tt, ok := asTime(t)
		if !ok {
			return ""
		}
		d := tt.Sub(now)
		if d >= 0 {
			return "in " + human(d)
		}
		return human(-d) + " ago"
	},
	"short": func(s string) string {
		if len(s) > 19 {
			return s[:19] + "…"
		}
		return s
	},
	"doiURL": doiURL,
	// web reports whether a manifest URL is an absolute http(s) URL, the only
	// kind the pages link to; others (file://, git://, local paths) are
	// shown as text.
	"web": func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
	},
	// firstN and restN split a list for display (refs beyond the first few).
	"firstN": func(n int, xs []string) []string { return xs[:min(n, len(xs))] },
	"restN":  func(n int, xs []string) int { return max(0, len(xs)-n) },
	"label":  func(s any) string { return strings.ReplaceAll(fmt.Sprint(s), "_", " ") },
	"query":  queryString,
	"standing": func(f float64) string {
		if f == math.Trunc(f) {
			return fmt.Sprintf("%+.0f", f)
		}
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%+.2f", f), "0"), ".")
	},
	"join": strings.Join,
	"seed": func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	},
	"add": func(a, b int) int { return a + b },
	// px prints an SVG coordinate (plot.go) to a tenth of a unit.
	"px":  func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"dur": human,
}

func asTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t == nil || t.IsZero() {
			return time.Time{}, false
		}
		return *t, true
	}
	return time.Time{}, false
}

// human renders a duration coarsely: "45 s", "12 min", "3 h 20 min", "2 d 4 h".
func human(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		m := int(d.Minutes()) - 60*h
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	default:
		days := int(d.Hours()) / 24
		h := int(d.Hours()) - 24*days
		if h == 0 {
			return fmt.Sprintf("%d d", days)
		}
		return fmt.Sprintf("%d d %d h", days, h)
	}
}

// step is one state on a claim's lifecycle strip.
type step struct {
	State  dotlab.ClaimState
	Status string // done | current | todo | skipped
	At     *time.Time
}

// lifecycle lays the claim's history over the states in order: states the
// claim passed through are done (with when), its state is current, later
// ones are todo and earlier ones it never entered (a claim that settles
// without a dispute skips disputed and reviewed) are skipped.
func lifecycle(c *dotlab.Claim, events []dotlab.ClaimEvent) []step {
	seen := map[dotlab.ClaimState]time.Time{}
	for _, e := range events {
		if _, ok := seen[e.State]; !ok || e.At.After(seen[e.State]) {
			seen[e.State] = e.At
		}
	}
	cur := -1
	for i, s := range dotlab.ClaimStates {
		if s == c.State {
			cur = i
		}
	}
	out := make([]step, 0, len(dotlab.ClaimStates))
	for i, s := range dotlab.ClaimStates {
		st := step{State: s}
		if at, ok := seen[s]; ok {
			at := at
			st.At = &at
		}
		switch {
		case i == cur:
			st.Status = "current"
		case i > cur:
			st.Status = "todo"
		case st.At != nil:
			st.Status = "done"
		default:
			st.Status = "skipped"
		}
		out = append(out, st)
	}
	return out
}

// queryString builds "?k=v&…" from key, value pairs, leaving out empty
// values ("" when none is left).
func queryString(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}
