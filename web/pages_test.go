package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

func TestPagesRender(t *testing.T) {
	s := newSite(t)
	for _, tc := range []struct {
		path  string
		wants []string
	}{
		{"/", []string{"DotLab: published science, rerun", `href="/claims?state=settled"`, "Fisher 1935: tea tasting", `href="/docs/manifest-spec"`}},
		{"/claims", []string{s.disputed, s.reproduced, s.labClaim, "Listed claim 2"}},
		{"/claims?state=settled", []string{s.disputed, s.reproduced}},
		{"/claims/" + s.disputed, []string{"https://doi.org/10.1093/biomet/6.1.1", "Targets and reruns", "1.2299", "outside tolerance",
			"For the challenger", "sd_diff: Student divides by n", "<strong>overturned</strong>: the claim settled as", sqlstoretest_DataSHA256, `aria-current="step"`, "-0.0599"}},
		{"/runs/" + s.runNotReproduced, []string{"Download the raw JSON-lines log", "/api/v1/jobs/" + s.disputed + "/logs", "sleep.csv verified", "python3 analysis.py exited 0", "✓ as pinned", "Overturned:",
			`data-complete="false"`, "✗ Incomplete log:", "covers 1 of the 7 items", `data-item="input:sleep"`, `comparison sd_diff: a &#34;compare&#34; line with data.name &#34;sd_diff&#34; and data.rerun 1.2299`}},
		{"/runs/" + s.runReproduced, []string{"reproduced", "Settled as", `data-complete="true"`, "✓ Well logged:", "(7 of 7)",
			`id="signature">Signed by`, `data-signed="true"`, htmlKeyID(s.runnerKey.Public().ID)}},
		{"/runs/" + s.runNotReproduced, []string{`id="signature">Unsigned`}},
		{"/claims/" + s.disputed, []string{`<span class="unsigned" data-signed="false">unsigned</span>`}},
		{"/runs/" + s.runNotReproduced + "?level=warn", []string{"sd_diff outside tolerance"}},
		{"/labs/" + s.labClaim, []string{"collab-cy", "Does analysis.py divide by n or n-1?", "analysis.py:12", `data-cursor="3.2"`, "type-blocker"}},
		{"/agents/" + s.ids["runner-ada"], []string{"runner-ada", `data-standing="-0.5"`, "Recent activity", s.runReproduced,
			`id="runs-overturned">1<`, `id="runs-upheld">1<`, `id="runs-well-logged">1<`, "1 overturned by a dispute",
			`id="signing-key">Signs its runs`, htmlKeyID(s.runnerKey.Public().ID)}},
		{"/agents/" + s.ids["submitter"], []string{"Registered no signing key"}},
		{"/docs", []string{"Replication manifest, spec v0.1", "/docs/threat-model"}},
		{"/docs/manifest-spec", []string{"<h1", "Replication manifest, spec v0.1", "<table>"}},
		{"/docs/protocol", []string{`href="/docs/manifest-spec#5-canonical-identity"`}},
		{"/spec/manifest.schema.json", []string{`"$schema"`}},
	} {
		code, hdr, body := s.get(tc.path, "text/html")
		if code != http.StatusOK {
			t.Errorf("%s: status %d: %.300s", tc.path, code, body)
			continue
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(tc.path, "/spec/") && ct != "text/html; charset=utf-8" {
			t.Errorf("%s: content type %q", tc.path, ct)
		}
		contains(t, tc.path, body, tc.wants...)
	}
	// A run the claim settled with is not flagged.
	if _, _, body := s.get("/runs/"+s.runReproduced, ""); strings.Contains(body, "Overturned:") {
		t.Error("upheld run flagged as overturned")
	}
	// The log filter keeps only matching lines.
	_, _, body := s.get("/runs/"+s.runNotReproduced+"?level=warn", "")
	if strings.Contains(body, "sleep.csv verified") {
		t.Error("level=warn filter kept an info line")
	}
}

// htmlKeyID is a key id as html/template writes it in text ('+' as &#43;).
func htmlKeyID(id string) string { return strings.ReplaceAll(id, "+", "&#43;") }

// sqlstoretest_DataSHA256 is the pinned dataset hash of the fixtures.
const sqlstoretest_DataSHA256 = "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"

func TestPagesErrors(t *testing.T) {
	s := newSite(t)
	for path, want := range map[string]int{
		"/claims/DL-9999":         http.StatusNotFound,
		"/runs/run_nope":          http.StatusNotFound,
		"/agents/ag_nope":         http.StatusNotFound,
		"/labs/DL-9999":           http.StatusNotFound,
		"/docs/nope":              http.StatusNotFound,
		"/no/such/page":           http.StatusNotFound,
		"/claims?state=bogus":     http.StatusUnprocessableEntity,
		"/claims?after=%3Cscript": http.StatusUnprocessableEntity,
	} {
		code, hdr, body := s.get(path, "text/html")
		if code != want {
			t.Errorf("%s: status %d, want %d", path, code, want)
		}
		if !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(body, `role="alert"`) {
			t.Errorf("%s: not an HTML error page: %.200s", path, body)
		}
		if strings.Contains(body, "<script>") && !strings.Contains(body, "/assets/") {
			t.Errorf("%s: unescaped input in error page", path)
		}
	}
	_, _, body := s.get("/claims?state=bogus", "")
	contains(t, "bad state", body, "state: &#34;bogus&#34; is not a claim state")
}

func TestContentNegotiation(t *testing.T) {
	s := newSite(t)
	var c dotlab.Claim
	s.apiJSON("/claims/"+s.disputed, &c)
	if c.ID != s.disputed || c.Outcome != dotlab.OutcomeReproduced || c.Manifest == nil {
		t.Fatalf("claim JSON: %+v", c)
	}
	var p dotlab.AgentProfile
	s.apiJSON("/agents/"+s.ids["runner-ada"], &p)
	// 1 upheld run with a complete log (1 + 0.5), 1 overturned (−2).
	if p.Standing != -0.5 || p.JobsCompleted != 2 || p.RunsOverturned != 1 || p.RunsUpheld != 1 || p.RunsWellLogged != 1 {
		t.Fatalf("profile JSON: %+v", p)
	}
	var sum dotlab.Summary
	s.apiJSON("/", &sum)
	if sum.Total != 6 || sum.ClaimsByState[dotlab.StateSettled] != 2 || len(sum.RecentlySettled) != 2 {
		t.Fatalf("summary JSON: %+v", sum)
	}
	var msgs struct {
		Messages []dotlab.LabMessage `json:"messages"`
	}
	s.apiJSON("/labs/"+s.labClaim, &msgs)
	if len(msgs.Messages) != 3 || msgs.Messages[2].Body != hostileBody {
		t.Fatalf("lab JSON: %+v", msgs)
	}
	// A browser's Accept header gets HTML; every page links its JSON.
	code, hdr, body := s.get("/claims/"+s.disputed, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || hdr.Get("Vary") != "Accept" {
		t.Fatalf("browser accept: %d %v", code, hdr)
	}
	contains(t, "alternate link", body, `<link rel="alternate" type="application/json" href="/api/v1/claims/`+s.disputed+`">`)
	// application/json with a lower q than text/html stays HTML.
	if _, hdr, _ := s.get("/claims", "application/json;q=0.5, text/html"); !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("q ordering ignored: %v", hdr)
	}
	var list struct {
		Claims []json.RawMessage `json:"claims"`
	}
	s.apiJSON("/claims?state=settled", &list)
	if len(list.Claims) != 2 {
		t.Fatalf("claims?state=settled JSON: %d claims", len(list.Claims))
	}
}

// TestEscapingServer checks the bytes the server sends: markup in a
// manifest title and a lab message arrives as escaped text.
func TestEscapingServer(t *testing.T) {
	s := newSite(t)
	for _, path := range []string{"/claims/" + s.labClaim, "/labs/" + s.labClaim, "/claims"} {
		_, hdr, body := s.get(path, "")
		for _, bad := range []string{"<script>window.__pwned", "<img src=x", "<b>bold</b>", `href="javascript:`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: raw markup %q in the page", path, bad)
			}
		}
		if !strings.Contains(body, html.EscapeString("<script>window.__pwned=1</script>")) {
			t.Errorf("%s: escaped title missing", path)
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
	_, _, body := s.get("/labs/"+s.labClaim, "")
	if !strings.Contains(body, html.EscapeString(`<img src=x onerror="window.__pwned=4">`)) {
		t.Error("escaped message body missing")
	}
}

func TestPagesHTTPDetails(t *testing.T) {
	s := newSite(t)
	// Another method on a page is 405 with Allow; on no page, 404.
	for path, want := range map[string]int{"/claims": 405, "/": 405, "/claims/" + s.disputed: 405, "/nothing/here": 404} {
		req, _ := http.NewRequest(http.MethodPost, s.base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want || (want == 405 && res.Header.Get("Allow") != "GET, HEAD") {
			t.Errorf("POST %s: %d Allow %q, want %d", path, res.StatusCode, res.Header.Get("Allow"), want)
		}
	}
	// Assets: no listing, the 404 page for missing files, long caching only
	// for a fingerprinted hit.
	for path, want := range map[string]int{"/assets/": 404, "/assets/nope.css": 404, "/assets/style.css": 200, "/assets/lab.js": 200} {
		code, hdr, _ := s.get(path, "")
		if code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
		if code != 200 && strings.Contains(hdr.Get("Cache-Control"), "immutable") {
			t.Errorf("%s: a miss is cached for good", path)
		}
	}
	// Links: only http(s) URLs become links; a DOI is percent-encoded.
	_, _, body := s.get("/claims/"+s.disputed, "")
	contains(t, "links", body, `<a href="https://data.example.org/sleep.csv" rel="nofollow noopener">`, `href="https://doi.org/10.1093/biomet/6.1.1"`)
	// Negotiation: specific ranges beat wildcards; bad q counts 0; /agents/me stays a page.
	for accept, wantJSON := range map[string]bool{
		"application/json":                        true,
		"*/*":                                     false,
		"*/*, application/json;q=0.5":             false,
		"application/*, text/html;q=0.9":          true,
		"application/json;q=foo, text/html;q=0.9": false,
		"text/html;q=0.1, application/json;q=0.2": true,
	} {
		_, hdr, _ := s.get("/claims", accept)
		if got := strings.HasPrefix(hdr.Get("Content-Type"), "application/json"); got != wantJSON {
			t.Errorf("Accept %q: JSON %v, want %v", accept, got, wantJSON)
		}
	}
	if code, hdr, _ := s.get("/agents/me", "application/json"); code != 404 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Errorf("/agents/me with JSON accept: %d %s", code, hdr.Get("Content-Type"))
	}
}
