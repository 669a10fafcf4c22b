package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sqlstore"
)

// listingEnv is a real server over a real SQLite file, with or without
// --allow-private-urls, and a registered submitter.
type listingEnv struct {
	*env
	key string
	n   int
}

func newListingEnv(t *testing.T, allowPrivate bool) *listingEnv {
	clock := sqlstoretest.NewClock()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{Clock: clock})
	api, err := httpapi.New(httpapi.Config{Store: db, Clock: clock, Version: "test", Leaks: leaks(t), AllowPrivateURLs: allowPrivate})
	if err != nil {
		t.Fatal(err)
	}
	e := &listingEnv{env: &env{t: t, srv: newServer(t, api), clock: clock, db: db}}
	_, e.key = e.register("submitter")
	return e
}

// list POSTs a fresh manifest with one field set (a JSON path below the
// manifest: "datasets.0.url", "code.repository", "environment.image") and
// returns whether it was listed, and the error body when not.
func (e *listingEnv) list(field, value string) (bool, apiv1.ErrorBody) {
	e.t.Helper()
	e.n++
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(sqlstoretest.ManifestJSON(fmt.Sprintf("listing probe %d", e.n))))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		e.t.Fatal(err)
	}
	keys := strings.Split(field, ".")
	node := any(m)
	for _, k := range keys[:len(keys)-1] {
		switch n := node.(type) {
		case map[string]any:
			node = n[k]
		case []any:
			var i int
			fmt.Sscan(k, &i)
			node = n[i]
		}
	}
	node.(map[string]any)[keys[len(keys)-1]] = value
	raw, _ := json.Marshal(m)
	r := e.do("POST", "/api/v1/claims", e.key, map[string]any{"manifest": string(raw), "field": "statistics"})
	switch r.status {
	case 201:
		return true, apiv1.ErrorBody{}
	case 422:
		return false, r.err()
	}
	e.t.Fatalf("POST /claims %s=%q: status %d %s", field, value, r.status, r.body)
	return false, apiv1.ErrorBody{}
}

// jsonPath is how the 422 detail addresses field ("datasets.0.url" →
// "manifest: $.datasets[0].url: ").
func jsonPath(field string) string {
	p := "$"
	for _, k := range strings.Split(field, ".") {
		if k >= "0" && k <= "9" {
			p += "[" + k + "]"
		} else {
			p += "." + k
		}
	}
	return "manifest: " + p + ": "
}

// listingURLs: what a public server (strict) and a private one
// (--allow-private-urls) list as a dataset URL or code repository.
var listingURLs = []struct {
	url             string
	strict, private bool
}{
	{"https://data.example.org/sleep.csv", true, true},
	{"https://93.184.216.34/sleep.csv", true, true},
	{"https://[2606:4700::1111]/sleep.csv", true, true},
	{"https://data.example.org:8443/sleep.csv", true, true},
	{"file:///etc/passwd", false, false},
	{"file://localhost/etc/shadow", false, false},
	{"file:///var/lib/dotlab/cache/x", false, false},
	{"/etc/passwd", false, false},
	{"./x", false, false},
	{"../x", false, false},
	{`C:\x`, false, false},
	{"C:/x", false, false},
	{"//data.example.org/x", false, false},
	{"https://user:pass@data.example.org/x", false, false},
	{"https://token@data.example.org/x", false, false},
	{"http://user:pass@127.0.0.1/x", false, false},
	{"ftp://data.example.org/x", false, false},
	{"ssh://git@data.example.org/r.git", false, false},
	{"gopher://data.example.org/x", false, false},
	{"https:///etc/passwd", false, false},
	{"https://169.254.169.254/latest/meta-data/iam/security-credentials/", false, false},
	{"http://169.254.169.254/", false, false},
	{"https://169.254.170.2/v2/credentials", false, false},
	{"https://100.100.100.200/latest/meta-data", false, false},
	{"https://[fd00:ec2::254]/latest/meta-data", false, false},
	{"https://[fe80::1%25eth0]/x", false, false},
	{"https://[::ffff:169.254.169.254]/x", false, false},
	{"https://[64:ff9b::a9fe:a9fe]/x", false, false},
	{"https://0xa9fea9fe/x", false, false},
	{"https://2852039166/x", false, false},
	{"https://2130706433/x", false, false},
	{"https://0x7f.1/x", false, false},
	{"https://0x7f000001/x", false, false},
	{"https://017700000001/x", false, false},
	{"https://127.1/x", false, false},
	{"https://0177.0.0.1/x", false, false},
	{"https://0/x", false, false},
	{"https://data.123/x", false, false},
	{"https://１２７.0.0.1/x", false, false},
	{"https://data.example.org/a b", false, false},
	{"http://127.0.0.1/x", false, true},
	{"http://127.0.0.1:8090/sleep.csv", false, true},
	{"https://127.0.0.1/x", false, true},
	{"https://[::1]/x", false, true},
	{"https://[::ffff:127.0.0.1]/x", false, true},
	{"https://10.0.0.1/x", false, true},
	{"https://172.16.0.1/x", false, true},
	{"https://192.168.0.1/x", false, true},
	{"https://100.64.0.1/x", false, true},
	{"https://[fd12:3456::1]/x", false, true},
	{"https://0.0.0.0/x", false, true},
	{"https://192.0.2.1/x", false, true},
	{"https://localhost/x", false, true},
	{"https://registry.localhost/x", false, true},
	{"http://data.example.org/x", false, true},
}

// TestListingRefusesWhatRunnersRefuse lists every URL form as a dataset URL
// and as a code repository on a public and a private server: each listing
// outcome is the expected one, a refusal is 422 invalid naming the field,
// and the answer is the one the runner gives by URL form
// (runner.Policy.CheckURL, strict for the public server, AllowPrivate for
// the private one): listing-refused ⇔ runner-refused.
func TestListingRefusesWhatRunnersRefuse(t *testing.T) {
	servers := []struct {
		name   string
		env    *listingEnv
		policy runner.Policy
		want   func(i int) bool
	}{
		{"public", newListingEnv(t, false), runner.Policy{}, func(i int) bool { return listingURLs[i].strict }},
		{"private", newListingEnv(t, true), runner.Policy{AllowPrivate: true}, func(i int) bool { return listingURLs[i].private }},
	}
	for _, s := range servers {
		for i, c := range listingURLs {
			_, runnerErr := s.policy.CheckURL("code.repository", c.url)
			runnerRefuses := runnerErr != nil
			for _, field := range []string{"datasets.0.url", "code.repository"} {
				listed, body := s.env.list(field, c.url)
				if listed != s.want(i) {
					t.Errorf("%s server, %s = %q: listed=%v, want %v (%v)", s.name, field, c.url, listed, s.want(i), body.Detail)
					continue
				}
				if !listed && (body.Error != dotlab.EINVALID || len(body.Detail) == 0 || !strings.HasPrefix(body.Detail[0], jsonPath(field))) {
					t.Errorf("%s server, %s = %q: refusal %+v does not name %s", s.name, field, c.url, body, jsonPath(field))
				}
				// The invariant: what the runner refuses by form is never
				// listed. For code.repository (no schema pattern) the two
				// answers are the same; a dataset URL's schema pattern
				// (https?|file)://… may refuse more on a private server
				// (git://), never less.
				if runnerRefuses && listed {
					t.Errorf("%s server listed %s = %q, which the runner refuses: %v", s.name, field, c.url, runnerErr)
				}
				if field == "code.repository" && !runnerRefuses && !listed {
					t.Errorf("%s server refused %s = %q, which the runner fetches: %v", s.name, field, c.url, body.Detail)
				}
			}
			if runnerRefuses == s.want(i) {
				t.Errorf("%s: runner refuses %q = %v, want %v (%v)", s.name, c.url, runnerRefuses, !s.want(i), runnerErr)
			}
		}
	}
}

// TestListingImageRegistry: the image reference's registry host is held to
// the same address rules, with the same answer as runner.Policy.CheckImage.
func TestListingImageRegistry(t *testing.T) {
	const dig = "@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	pub, priv := newListingEnv(t, false), newListingEnv(t, true)
	for _, c := range []struct {
		registry        string
		strict, private bool
	}{
		{"registry.example.org", true, true},
		{"ghcr.io", true, true},
		{"93.184.216.34:5000", true, true},
		{"127.0.0.1:5000", false, true},
		{"10.0.0.1", false, true},
		{"localhost:5000", false, true},
		{"169.254.169.254", false, false},
		{"100.100.100.200", false, false},
		{"2130706433:5000", false, false},
		{"0x7f.1", false, false},
		{"127.1:5000", false, false},
	} {
		ref := c.registry + "/lab/python" + dig
		for _, s := range []struct {
			env    *listingEnv
			policy runner.Policy
			want   bool
		}{{pub, runner.Policy{}, c.strict}, {priv, runner.Policy{AllowPrivate: true}, c.private}} {
			listed, body := s.env.list("environment.image", ref)
			if listed != s.want {
				t.Errorf("AllowPrivate=%v image %s: listed=%v, want %v (%v)", s.policy.AllowPrivate, ref, listed, s.want, body.Detail)
			}
			if !listed && (len(body.Detail) == 0 || !strings.HasPrefix(body.Detail[0], "manifest: $.environment.image: ")) {
				t.Errorf("image %s: refusal %v does not name $.environment.image", ref, body.Detail)
			}
			if runnerRefuses := s.policy.CheckImage("environment.image", ref) != nil; runnerRefuses == listed {
				t.Errorf("AllowPrivate=%v image %s: listed=%v but the runner refuses=%v", s.policy.AllowPrivate, ref, listed, runnerRefuses)
			}
		}
	}
}

// TestListingReportsEveryRefusedField: one manifest with several hostile
// fields gets one 422 listing each of them by path.
func TestListingReportsEveryRefusedField(t *testing.T) {
	e := newListingEnv(t, false)
	raw := string(sqlstoretest.ManifestJSON("many hostile fields"))
	for old, new := range map[string]string{
		"https://data.example.org/sleep.csv":  "file:///etc/shadow",
		"https://code.example.org/sleep.git":  "https://u:p@169.254.169.254/r.git",
		"registry.example.org/python@sha256:": "127.0.0.1:5000/python@sha256:",
	} {
		raw = strings.Replace(raw, old, new, 1)
	}
	r := e.do("POST", "/api/v1/claims", e.key, map[string]any{"manifest": raw, "field": "statistics"})
	expect(t, r, 422, dotlab.EINVALID)
	got := strings.Join(r.err().Detail, "\n")
	for _, p := range []string{"manifest: $.datasets[0].url: ", "manifest: $.code.repository: ", "manifest: $.environment.image: "} {
		if !strings.Contains(got, p) {
			t.Errorf("detail does not name %s:\n%s", p, got)
		}
	}
	if strings.Contains(got, "u:p@") {
		t.Errorf("the refusal repeats URL credentials:\n%s", got)
	}
	if cs, err := e.db.FindClaims(context.Background(), dotlab.Page{}); err != nil || len(cs) != 0 {
		t.Fatalf("claims stored after refusals: %d (%v)", len(cs), err)
	}
}
