package web_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed/atom"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/manifest"
)

// travelTitle is a settled claim's title full of what breaks each format:
// markup and a script end tag (HTML, JSON-LD), XML's specials (feed, badge)
// and BibTeX's and LaTeX's (citation).
const travelTitle = `Gosset 1908 </script><script>window.__pwned=5</script> <!-- & "q" 'a' {unbalanced \ 100% $x$ #1 a_b ^ ~ }}`

// extremeTargets are targets at the ends of the decimal range: the plot
// must place them all (docs/manifest-spec.md §6).
const extremeTargets = `[
    {"name": "huge", "value": 1.7976931348623157e308, "tolerance": {"type": "absolute", "value": 1e300}},
    {"name": "tiny", "value": 1e-300, "tolerance": {"type": "relative", "value": 0.01}},
    {"name": "negative", "value": -42.5, "tolerance": {"type": "absolute", "value": 0.5}},
    {"name": "zero_tol", "value": 0, "tolerance": {"type": "absolute", "value": 0}}
  ]`

// traveller lists claims and reruns them with its own agents on a site.
type traveller struct {
	s                       *site
	sub, runner, challenger *dotlab.Agent
}

func newTraveller(s *site) *traveller {
	return &traveller{s: s, sub: s.agent("submitter-t"), runner: s.agent("runner-t"), challenger: s.agent("challenger-t")}
}

// publish lists a claim with title and targets (Student's two when ""),
// has the runner draw it and publish the body mk makes for the job.
func (tr *traveller) publish(title, targets string, mk func(job string) *dotlab.RunBody) string {
	t, ctx := tr.s.t, context.Background()
	p := sqlstoretest.Protocol(tr.s.db)
	nc := sqlstoretest.NewClaim(t, title)
	if targets != "" {
		raw := []byte(sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: title, Dependencies: `{"python3": "3.11.2"}`, Seed: "1908", Requires: []string{}, Targets: targets}))
		nc = dotlab.NewClaim{Raw: raw, Manifest: must(manifest.Parse(raw)), ManifestHash: must(manifest.Hash(raw)), Field: "statistics"}
	}
	c := must(p.CreateClaim(ctx, tr.sub.ID, nc))
	for {
		j, found, err := p.NextJob(ctx, tr.runner)
		if err != nil || !found {
			t.Fatalf("draw: %+v %v %v", j, found, err)
		}
		if j.ClaimID == c.ID {
			break
		}
		must(p.DeclineJob(ctx, tr.runner.ID, j.ClaimID, dotlab.DeclineCapabilityMismatch))
	}
	must(p.AcceptJob(ctx, tr.runner.ID, c.ID))
	must(p.PublishRun(ctx, tr.runner, mk(c.ID), nil))
	return c.ID
}

// settle lets every challenge window close and settles.
func (tr *traveller) settle() {
	tr.s.clock.Advance(2 * time.Hour)
	must(sqlstoretest.Protocol(tr.s.db).Settle(context.Background()))
}

// uncompared is a spec_issue or input_mismatch run body.
func uncompared(o dotlab.Outcome) func(job string) *dotlab.RunBody {
	return func(job string) *dotlab.RunBody {
		b := sqlstoretest.RunBody(job, "1.58", "1.17", o)
		b.Comparisons, b.Notes = nil, "analysis.py needs a file the manifest does not pin"
		if o == dotlab.OutcomeInputMismatch {
			b.InputHashes["sleep"] = strings.Repeat("9", 64)
			b.Notes = "sleep.csv differs from its pin"
		}
		return b
	}
}

func compared(mean, sd string, o dotlab.Outcome) func(job string) *dotlab.RunBody {
	return func(job string) *dotlab.RunBody { return sqlstoretest.RunBody(job, mean, sd, o) }
}

// travelClaims are the claims of the travel tests beside the site's seed.
type travelClaims struct {
	notReproduced, specIssue, inputMismatch, hostile, window, extreme string
}

// seedTravel settles a not_reproduced, a spec_issue, an input_mismatch and
// a hostile-titled reproduced claim, and the extreme-valued claim with a
// challenge, and leaves one claim in its challenge window.
func seedTravel(s *site) (*traveller, travelClaims) {
	tr := newTraveller(s)
	var c travelClaims
	c.notReproduced = tr.publish("Cushny 1905: hyoscine", "", compared("1.58", "1.2299", dotlab.OutcomeNotReproduced))
	c.specIssue = tr.publish("Spec issue claim", "", uncompared(dotlab.OutcomeSpecIssue))
	c.inputMismatch = tr.publish("Input mismatch claim", "", uncompared(dotlab.OutcomeInputMismatch))
	c.hostile = tr.publish(travelTitle, "", compared("1.58", "1.17", dotlab.OutcomeReproduced))
	c.extreme = tr.publish("Extremes", extremeTargets, extremeRun(false))
	body := &dotlab.ChallengeBody{RunBody: *extremeRun(true)(c.extreme), ClaimID: c.extreme, Agrees: ptr(true)}
	must(sqlstoretest.Protocol(s.db).CreateChallenge(context.Background(), tr.challenger, body, nil))
	tr.settle()
	c.window = tr.publish("Still open", "", compared("1.58", "1.17", dotlab.OutcomeReproduced))
	return tr, c
}

// extremeRun reruns extremeTargets: the runner misses "negative", the
// challenger misses "huge" by the whole range of a double; both declare
// not_reproduced (so the challenge agrees).
func extremeRun(challenger bool) func(job string) *dotlab.RunBody {
	return func(job string) *dotlab.RunBody {
		b := sqlstoretest.RunBody(job, "0", "0", dotlab.OutcomeNotReproduced)
		vals := []string{"1.7976931348623157e308", "1.005e-300", "-41", "0"}
		if challenger {
			vals = []string{"-1.7976931348623157e308", "1.001e-300", "-42.75", "0"}
		}
		b.Comparisons = nil
		for i, name := range []string{"huge", "tiny", "negative", "zero_tol"} {
			b.Comparisons = append(b.Comparisons, dotlab.RunComparison{Name: name, Rerun: dotlab.Decimal(vals[i])})
		}
		return b
	}
}

func ptr[T any](v T) *T { return &v }

// svgDoc is what the badge tests read of an SVG.
type svgDoc struct {
	XMLName   xml.Name `xml:"http://www.w3.org/2000/svg svg"`
	Role      string   `xml:"role,attr"`
	AriaLabel string   `xml:"aria-label,attr"`
	Width     float64  `xml:"width,attr"`
	Height    float64  `xml:"height,attr"`
	Title     string   `xml:"title"`
	Rects     []struct {
		Fill string `xml:"fill,attr"`
	} `xml:"g>rect"`
	Texts []struct {
		Hidden string `xml:"aria-hidden,attr"`
		Text   string `xml:",chardata"`
	} `xml:"g>text"`
}

// TestBadge: each claim's badge is an SVG (parsed by encoding/xml) saying
// its outcome and state; it is cached with an ETag that answers 304 and
// changes when the claim settles.
func TestBadge(t *testing.T) {
	s := newSite(t)
	tr, c := seedTravel(s)
	for id, want := range map[string]string{
		s.reproduced: "reproduced", s.disputed: "reproduced", c.notReproduced: "not reproduced",
		c.specIssue: "spec issue", c.inputMismatch: "input mismatch", c.window: "reproduced, open to challenge",
		s.labClaim: "awaiting a rerun",
	} {
		code, hdr, body := s.get("/claims/"+id+"/badge.svg", "")
		if code != http.StatusOK || hdr.Get("Content-Type") != "image/svg+xml" {
			t.Fatalf("%s: %d %s", id, code, hdr.Get("Content-Type"))
		}
		var doc svgDoc
		if err := xml.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: badge is not XML: %v\n%s", id, err, body)
		}
		label := "DotLab " + id + ": " + want
		shown := []string{}
		for _, x := range doc.Texts {
			if x.Hidden == "" {
				shown = append(shown, x.Text)
			}
		}
		if doc.Role != "img" || doc.Title != label || doc.AriaLabel != label || doc.Height != 20 || doc.Width < 100 ||
			strings.Join(shown, "|") != "DotLab "+id+"|"+want || len(doc.Rects) != 3 {
			t.Errorf("%s: badge %+v, want %q", id, doc, label)
		}
	}
	// The same bytes answer 304 to their ETag; settling changes them.
	path := "/claims/" + c.window + "/badge.svg"
	_, hdr, _ := s.get(path, "")
	etag, cc := hdr.Get("ETag"), hdr.Get("Cache-Control")
	if etag == "" || cc != "public, max-age=300" {
		t.Fatalf("open claim's badge: ETag %q Cache-Control %q", etag, cc)
	}
	if code := s.conditional(path, etag); code != http.StatusNotModified {
		t.Errorf("If-None-Match %s: %d, want 304", etag, code)
	}
	tr.settle()
	_, hdr, body := s.get(path, "")
	if hdr.Get("ETag") == etag || hdr.Get("Cache-Control") != "public, max-age=86400" || !strings.Contains(body, ">reproduced<") {
		t.Errorf("settled badge: ETag %q (was %q), Cache-Control %q: %s", hdr.Get("ETag"), etag, hdr.Get("Cache-Control"), body)
	}
	if code := s.conditional(path, etag); code != http.StatusOK {
		t.Errorf("old ETag after settling: %d, want 200", code)
	}
	if code, _, _ := s.get("/claims/DL-9999/badge.svg", ""); code != http.StatusNotFound {
		t.Errorf("badge of no claim: %d", code)
	}
	_, _, page := s.get("/claims/"+s.reproduced, "")
	md := fmt.Sprintf("[![DotLab %s](%s/claims/%s/badge.svg)](%s/claims/%s)", s.reproduced, s.base, s.reproduced, s.base, s.reproduced)
	contains(t, "claim page", page, html.EscapeString(md), `<img class="badge" src="/claims/`+s.reproduced+`/badge.svg" alt="DotLab `+s.reproduced+`: reproduced"`)
}

// conditional GETs path with If-None-Match and returns the status.
func (s *site) conditional(path, etag string) int {
	req := must(http.NewRequest(http.MethodGet, s.base+path, nil))
	req.Header.Set("If-None-Match", etag)
	res := must(http.DefaultClient.Do(req))
	res.Body.Close()
	return res.StatusCode
}

// TestFeedAtom: /feed.atom, read by a real Atom parser (gofeed's), has the
// elements RFC 4287 requires, the settled claims newest first with stable
// ids, links back to each claim page, is linked from every page, and
// holds at most the latest 50.
func TestFeedAtom(t *testing.T) {
	s := newSite(t)
	tr, c := seedTravel(s)
	feed := s.atom()
	if !strings.HasPrefix(feed.ID, "tag:") || feed.Title == "" || feed.Updated != "2026-01-01T04:00:00Z" || feed.UpdatedParsed == nil ||
		len(feed.Authors) != 1 || !strings.HasPrefix(feed.Authors[0].Name, "DotLab") {
		t.Fatalf("feed head: id %q title %q updated %q authors %+v", feed.ID, feed.Title, feed.Updated, feed.Authors)
	}
	if self := linkOf(feed.Links, "self"); self != s.base+"/feed.atom" {
		t.Errorf("rel=self %q", self)
	}
	if alt := linkOf(feed.Links, "alternate"); alt != s.base+"/claims?state=settled" {
		t.Errorf("rel=alternate %q", alt)
	}
	// 7 settled: the seed's 2 and seedTravel's 5 (the open claim is not in it).
	if len(feed.Entries) != 7 {
		t.Fatalf("%d entries, want 7", len(feed.Entries))
	}
	ids := map[string]bool{}
	for i, e := range feed.Entries {
		if e.ID == "" || ids[e.ID] || e.Title == "" || e.Updated == "" || e.Summary == "" || e.UpdatedParsed == nil {
			t.Errorf("entry %d: %+v", i, e)
		}
		ids[e.ID] = true
		if i > 0 && e.Updated > feed.Entries[i-1].Updated {
			t.Errorf("entry %d updated %s after entry %d's %s: not newest first", i, e.Updated, i-1, feed.Entries[i-1].Updated)
		}
		if alt := linkOf(e.Links, "alternate"); !strings.HasPrefix(alt, s.base+"/claims/DL-") {
			t.Errorf("entry %d: alternate link %q", i, alt)
		}
	}
	hostile := entryFor(t, feed, s.base+"/claims/"+c.hostile)
	if hostile.Title != c.hostile+" "+travelTitle+" (reproduced)" || !strings.Contains(hostile.Summary, "reproduced under the published spec") {
		t.Errorf("hostile entry: title %q summary %+v", hostile.Title, hostile.Summary)
	}
	// Stable ids: the same entries after a restart.
	s.restart()
	for _, e := range s.atom().Entries {
		if !ids[e.ID] {
			t.Errorf("id %s is new after a restart", e.ID)
		}
	}
	for _, path := range []string{"/", "/claims", "/claims/" + s.reproduced, "/docs"} {
		_, _, page := s.get(path, "")
		contains(t, path, page, `<link rel="alternate" type="application/atom+xml" title="DotLab: settled claims" href="/feed.atom">`)
	}
	// Bounded: 50 more settled claims, and the feed holds the latest 50.
	for i := 0; i < 50; i++ {
		tr.publish(fmt.Sprintf("Bound %d", i), "", uncompared(dotlab.OutcomeSpecIssue))
	}
	feed = s.atom()
	if len(feed.Entries) != 50 || !strings.Contains(feed.Entries[0].Title, "Bound 49") {
		t.Errorf("%d entries (first %q), want the latest 50", len(feed.Entries), feed.Entries[0].Title)
	}
}

// atom fetches and parses the feed with gofeed's Atom parser.
func (s *site) atom() *atom.Feed {
	s.t.Helper()
	code, hdr, body := s.get("/feed.atom", "")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/atom+xml; charset=utf-8" || hdr.Get("ETag") == "" {
		s.t.Fatalf("feed: %d %v", code, hdr)
	}
	f, err := (&atom.Parser{}).Parse(strings.NewReader(body))
	if err != nil {
		s.t.Fatalf("feed is not Atom: %v\n%s", err, body)
	}
	return f
}

func linkOf(links []*atom.Link, rel string) string {
	for _, l := range links {
		if l.Rel == rel {
			return l.Href
		}
	}
	return ""
}

func entryFor(t *testing.T, f *atom.Feed, href string) *atom.Entry {
	t.Helper()
	for _, e := range f.Entries {
		if linkOf(e.Links, "alternate") == href {
			return e
		}
	}
	t.Fatalf("no entry links %s", href)
	return nil
}

var ldScript = regexp.MustCompile(`(?s)<script type="application/ld\+json">(.*?)</script>`)

// jsonLD returns the JSON-LD blocks of a page.
func (s *site) jsonLD(path string) []string {
	_, _, page := s.get(path, "")
	var out []string
	for _, m := range ldScript.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// claimReviewProps are the schema.org properties a DotLab ClaimReview may
// use (https://schema.org/ClaimReview: its own, Review's, CreativeWork's
// and Thing's), by type; a rating score (ratingValue, bestRating,
// worstRating) is not among them on purpose.
var claimReviewProps = map[string][]string{
	"ClaimReview":      {"@context", "@type", "url", "name", "claimReviewed", "itemReviewed", "datePublished", "author", "reviewBody", "reviewRating"},
	"Claim":            {"@type", "name", "appearance", "firstAppearance"},
	"ScholarlyArticle": {"@type", "name", "url", "identifier"},
	"PropertyValue":    {"@type", "propertyID", "value"},
	"Organization":     {"@type", "name", "url"},
	"Rating":           {"@type", "alternateName"},
}

// checkLD checks every object in v against claimReviewProps.
func checkLD(t *testing.T, where string, v any) {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	typ, _ := obj["@type"].(string)
	allowed, known := claimReviewProps[typ]
	if !known {
		t.Errorf("%s: @type %q is not one DotLab uses", where, typ)
	}
	for k, sub := range obj {
		if !contains1(allowed, k) {
			t.Errorf("%s: %s has property %q", where, typ, k)
		}
		checkLD(t, where+"."+k, sub)
	}
}

func contains1(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestClaimReviewJSONLD: a settled reproduced or not_reproduced claim's
// page carries one ClaimReview whose rating is the protocol's words, text
// only; spec_issue, input_mismatch and unsettled claims carry none; a title
// holding </script> stays inside the JSON. The JSON-LD is type-checked with
// schema-dts (tsc) in claimReviewTypes.
func TestClaimReviewJSONLD(t *testing.T) {
	s := newSite(t)
	_, c := seedTravel(s)
	type want struct{ rating, title string }
	typed := map[string]string{}
	for id, w := range map[string]want{
		s.reproduced:    {"reproduced under the published spec", "Fisher 1935: tea tasting"},
		c.notReproduced: {"not reproduced under the published spec", "Cushny 1905: hyoscine"},
		c.hostile:       {"reproduced under the published spec", travelTitle},
	} {
		blocks := s.jsonLD("/claims/" + id)
		if len(blocks) != 1 {
			t.Fatalf("%s: %d JSON-LD blocks, want 1", id, len(blocks))
		}
		if strings.ContainsAny(blocks[0], "<>") {
			t.Errorf("%s: JSON-LD holds a raw < or >: %s", id, blocks[0])
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(blocks[0]), &v); err != nil {
			t.Fatalf("%s: JSON-LD: %v", id, err)
		}
		checkLD(t, id, v)
		var rv struct {
			Context, Type, URL, ClaimReviewed, DatePublished string
			ItemReviewed                                     struct {
				Type, Name string
				Appearance struct{ Type, Name, URL string }
			}
			Author struct{ Type, Name string }
		}
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(regexp.MustCompile(`"@(context|type)"`).ReplaceAll(b, []byte(`"$1"`)), &rv)
		if rv.Context != "https://schema.org" || rv.Type != "ClaimReview" || rv.URL != s.base+"/claims/"+id || rv.ClaimReviewed != w.title ||
			rv.ItemReviewed.Type != "Claim" || rv.ItemReviewed.Appearance.URL != "https://doi.org/10.1093/biomet/6.1.1" ||
			rv.Author.Type != "Organization" || !strings.HasPrefix(rv.DatePublished, "2026-01-01T0") {
			t.Errorf("%s: ClaimReview %+v", id, rv)
		}
		if r := v["reviewRating"]; fmt.Sprint(r) != fmt.Sprint(map[string]any{"@type": "Rating", "alternateName": w.rating}) {
			t.Errorf("%s: reviewRating %v, want the words %q and no score", id, r, w.rating)
		}
		typed[id] = blocks[0]
	}
	claimReviewTypes(t, typed)
	for _, id := range []string{c.specIssue, c.inputMismatch, c.window, s.labClaim} {
		if blocks := s.jsonLD("/claims/" + id); len(blocks) != 0 {
			t.Errorf("%s: JSON-LD on a claim with no verdict on the paper: %v", id, blocks)
		}
	}
}

// nodeTool is path under .ci/node/node_modules at the repository root,
// where .ci/run installs the pinned npm tools (schema-dts, typescript,
// axe-core); missing, it fails the test in CI and skips it elsewhere.
func nodeTool(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", ".ci", "node", "node_modules", path))
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf(".ci/run must install %s into .ci/node (npm install --prefix .ci/node): %v", path, err)
		}
		t.Skipf("needs %s in .ci/node (see .ci/run): %v", path, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("needs Node.js: %v", err)
	}
	return p
}

// claimReviewTypes type-checks each JSON-LD block (by claim id) as a
// schema-dts WithContext<ClaimReview> with tsc --strict, beside a control
// with a misspelt property that tsc must refuse (so the check can fail).
func claimReviewTypes(t *testing.T, blocks map[string]string) {
	t.Helper()
	tsc := nodeTool(t, "typescript/bin/tsc")
	types := nodeTool(t, "schema-dts/dist/schema.d.ts")
	check := func(files map[string]string) (string, error) {
		dir := t.TempDir()
		var names []string
		for f, ld := range files {
			src := "import type { ClaimReview, WithContext } from \"schema-dts\";\nexport const review: WithContext<ClaimReview> = " + ld + ";\n"
			must(0, os.WriteFile(filepath.Join(dir, f+".ts"), []byte(src), 0o644))
			names = append(names, f+".ts")
		}
		cfg := map[string]any{"compilerOptions": map[string]any{"strict": true, "noEmit": true, "module": "esnext", "moduleResolution": "bundler",
			"target": "es2022", "types": []string{}, "paths": map[string][]string{"schema-dts": {types}}}, "files": names}
		b, _ := json.Marshal(cfg)
		must(0, os.WriteFile(filepath.Join(dir, "tsconfig.json"), b, 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", tsc, "-p", dir)
		out, err := cmd.CombinedOutput()
		t.Logf("tsc (%d files): %v %s", len(files), err, out)
		return string(out), err
	}
	files := map[string]string{}
	var one string
	for id, ld := range blocks {
		files[strings.ReplaceAll(id, "-", "_")], one = ld, ld
	}
	// One tsc run (it takes tens of seconds on schema.org's types): every
	// block must pass and the control, with a misspelt property, must not.
	files["control"] = strings.Replace(one, `"claimReviewed"`, `"claimReviewd"`, 1)
	out, err := check(files)
	var errs []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "error TS") {
			errs = append(errs, line)
		}
	}
	if err == nil || len(errs) != 1 || !strings.Contains(errs[0], "control.ts") || !strings.Contains(errs[0], "claimReviewd") {
		t.Errorf("tsc with schema-dts: want exactly one error, the control's misspelt property; got %v:\n%s", err, out)
	}
}

// bibEntry is a BibTeX entry as a BibTeX reader splits it: type, key and
// fields, each field's value between its outer braces with every brace
// balanced inside (an unbalanced value is an error, as it is for bibtex).
type bibEntry struct {
	Type, Key string
	Fields    map[string]string
}

// parseBib reads one entry of the form @type{key, name = {value} | bare, …}.
func parseBib(src string) (bibEntry, error) {
	e := bibEntry{Fields: map[string]string{}}
	src = strings.TrimSpace(src)
	head, rest, ok := strings.Cut(src, "{")
	if !ok || !strings.HasPrefix(head, "@") {
		return e, fmt.Errorf("no @type{ at the start")
	}
	e.Type = strings.ToLower(head[1:])
	e.Key, rest, ok = strings.Cut(rest, ",")
	if !ok {
		return e, fmt.Errorf("no key")
	}
	for {
		rest = strings.TrimLeft(rest, " \n\t,")
		if rest == "}" || rest == "" {
			return e, nil
		}
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			return e, fmt.Errorf("field without '=' at %.30q", rest)
		}
		after = strings.TrimLeft(after, " ")
		value, n, err := bibValue(after)
		if err != nil {
			return e, fmt.Errorf("field %s: %v", strings.TrimSpace(name), err)
		}
		e.Fields[strings.ToLower(strings.TrimSpace(name))] = value
		rest = after[n:]
	}
}

// bibValue reads a braced value (returning what is inside its outer
// braces) or a bare word, and how many bytes it took.
func bibValue(s string) (string, int, error) {
	if !strings.HasPrefix(s, "{") {
		end := strings.IndexAny(s, ",\n}")
		if end < 0 {
			return "", 0, fmt.Errorf("unterminated bare value")
		}
		return strings.TrimSpace(s[:end]), end, nil
	}
	depth := 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], i + 1, nil
			}
		}
	}
	return "", 0, fmt.Errorf("unbalanced braces")
}

// cslItem has the CSL-JSON (csl-data.json, CSL 1.0.2) fields DotLab
// writes, by their schema names and types; decoding refuses any other.
type cslItem struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Genre  string `json:"genre"`
	Title  string `json:"title"`
	Author []struct {
		Literal string `json:"literal"`
	} `json:"author"`
	Publisher string `json:"publisher"`
	Number    string `json:"number"`
	Issued    struct {
		DateParts [][]int `json:"date-parts"`
	} `json:"issued"`
	URL  string `json:"URL"`
	Note string `json:"note"`
}

// cslTypes are CSL 1.0.2's item types (the schema's "type" enum).
var cslTypes = strings.Fields(`article article-journal article-magazine article-newspaper bill book broadcast chapter classic collection
	dataset document entry entry-dictionary entry-encyclopedia event figure graphic hearing interview legal_case legislation manuscript
	map motion_picture musical_score pamphlet paper-conference patent performance periodical personal_communication post post-weblog
	regulation report review review-book software song speech standard thesis treaty webpage`)

// TestCitations: a settled claim's record as BibTeX (parsed: balanced, the
// fields a style needs, LaTeX's specials escaped) and CSL-JSON (the
// schema's fields and types); an unsettled claim has none yet.
func TestCitations(t *testing.T) {
	s := newSite(t)
	_, c := seedTravel(s)
	for _, id := range []string{s.reproduced, c.hostile, c.specIssue} {
		code, hdr, body := s.get("/claims/"+id+"/citation.bib", "")
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/x-bibtex; charset=utf-8" || hdr.Get("ETag") == "" {
			t.Fatalf("%s: citation.bib %d %v", id, code, hdr)
		}
		e, err := parseBib(body)
		if err != nil {
			t.Fatalf("%s: BibTeX: %v\n%s", id, err, body)
		}
		f := e.Fields
		if e.Type != "misc" || e.Key != "dotlab-"+id || !strings.HasPrefix(f["author"], "{DotLab") || f["year"] != "2026" ||
			f["month"] != "jan" || f["url"] != s.base+"/claims/"+id || f["number"] != id || !strings.Contains(f["note"], "doi:10.1093/biomet/6.1.1") {
			t.Errorf("%s: BibTeX %+v", id, e)
		}
		if id == c.hostile {
			want := `{` + id + ` Gosset 1908 </script><script>window.\_\_pwned=5</script> <!-- \& "q" 'a' \textbraceleft{}unbalanced \textbackslash{} 100\% \$x\$ \#1 a\_b \textasciicircum{} \textasciitilde{} \textbraceright{}\textbraceright{} (reproduced under the published spec)}`
			if f["title"] != want {
				t.Errorf("hostile title in BibTeX:\n got %s\nwant %s", f["title"], want)
			}
		}
		code, hdr, body = s.get("/claims/"+id+"/citation.json", "")
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/vnd.citationstyles.csl+json" {
			t.Fatalf("%s: citation.json %d %v", id, code, hdr)
		}
		var items []cslItem
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&items); err != nil || len(items) != 1 {
			t.Fatalf("%s: CSL-JSON: %v (%d items)\n%s", id, err, len(items), body)
		}
		it := items[0]
		if !contains1(cslTypes, it.Type) || it.ID != "dotlab-"+id || it.Number != id || it.URL != s.base+"/claims/"+id ||
			len(it.Author) != 1 || !strings.HasPrefix(it.Author[0].Literal, "DotLab") || fmt.Sprint(it.Issued.DateParts) != "[[2026 1 1]]" ||
			!strings.HasPrefix(it.Title, id+" ") {
			t.Errorf("%s: CSL-JSON %+v", id, it)
		}
		if id == c.hostile && it.Title != id+" "+travelTitle+" (reproduced under the published spec)" {
			t.Errorf("hostile title in CSL-JSON: %q", it.Title)
		}
	}
	for _, id := range []string{c.window, s.labClaim} {
		for _, f := range []string{"citation.bib", "citation.json"} {
			if code, _, _ := s.get("/claims/"+id+"/"+f, ""); code != http.StatusNotFound {
				t.Errorf("%s/%s of an unsettled claim: %d, want 404", id, f, code)
			}
		}
	}
	_, _, page := s.get("/claims/"+s.reproduced, "")
	contains(t, "settled claim page", page, `href="/claims/`+s.reproduced+`/citation.bib"`, `href="/claims/`+s.reproduced+`/citation.json"`)
	_, _, page = s.get("/claims/"+c.window, "")
	if strings.Contains(page, "citation.bib") {
		t.Error("an open claim's page links a citation")
	}
}
