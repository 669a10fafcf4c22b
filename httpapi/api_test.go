package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/sqlstore"
)

// env is a real HTTP server over a real store.
type env struct {
	t     *testing.T
	srv   *httptest.Server
	clock *sqlstoretest.Clock
	db    *sqlstore.DB
	// hints are the API calls named in the error details the test met
	// ("GET /api/v1/claims"), checked to exist when the test ends.
	hints map[string]bool
}

// hintRE finds an API call named in an error detail.
var hintRE = regexp.MustCompile(`\b(GET|POST|PUT) (/api/v1/[A-Za-z0-9_./{}?=&…-]+)`)

// noteHints records the calls the error details of the answer to method
// path name, other than the request itself (which a 404 or 405 repeats).
func (e *env) noteHints(method, path string, r resp) {
	if r.status < 400 || e.hints == nil {
		return
	}
	for _, d := range r.err().Detail {
		for _, m := range hintRE.FindAllStringSubmatch(d, -1) {
			if h := m[1] + " " + strings.TrimRight(m[2], ".,;:)"); h != method+" "+path {
				e.hints[h] = true
			}
		}
	}
}

// checkHints asks the server for every call an error detail named in the
// test: each must be a route it serves for that method (no 404
// no_such_route, no 405), so that no hint leads to a dead end.
func (e *env) checkHints() {
	ids := strings.NewReplacer("{id}", "DL-0001", "{run_id}", "run_x", "…", "x")
	for _, h := range dotlab.SortedKeys(e.hints) {
		method, path, _ := strings.Cut(h, " ")
		path, _, _ = strings.Cut(ids.Replace(path), "?")
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Errorf("hint %s: %v", h, err)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if code := (resp{status: res.StatusCode, body: b}).err().Error; code == dotlab.ENOSUCHROUTE || code == apiv1.EMETHODNOTALLOWED {
			e.t.Errorf("an error detail names %s, which the API does not serve: %s", h, b)
		}
	}
}

func newEnv(t *testing.T, engine sqlstore.Dialect) *env { return newEnvWith(t, engine, nil) }

// newEnvWith is newEnv with the server's Config changed by edit (when not nil).
func newEnvWith(t *testing.T, engine sqlstore.Dialect, edit func(*httpapi.Config)) *env {
	clock := sqlstoretest.NewClock()
	db := sqlstoretest.Open(t, engine, sqlstore.Options{Clock: clock})
	cfg := httpapi.Config{Store: db, Clock: clock, Version: "test", MaxBodyBytes: 64 << 10, Leaks: leaks(t)}
	if edit != nil {
		edit(&cfg)
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: newServer(t, api), clock: clock, db: db, hints: map[string]bool{}}
	t.Cleanup(e.checkHints) // before newServer's cleanup closes the server
	return e
}

// newServer serves api on loopback until the test ends; live streams are
// ended first so that closing does not wait for them.
func newServer(t *testing.T, api *httpapi.Server) *httptest.Server {
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Close()
		srv.Close()
	})
	return srv
}

// leaks shares one gitleaks checker across tests (loading its rules takes a
// moment).
func leaks(t *testing.T) *leakcheck.Checker {
	return servertest.Leaks(t)
}

func forEachEngine(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, eng := range sqlstoretest.Engines {
		t.Run(string(eng), func(t *testing.T) { fn(t, newEnv(t, eng)) })
	}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) err() apiv1.ErrorBody {
	var e apiv1.ErrorBody
	json.Unmarshal(r.body, &e)
	return e
}

func (e *env) do(method, path, key string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := resp{res.StatusCode, res.Header, b}
	e.noteHints(method, path, r)
	return r
}

func (e *env) register(name string, caps ...string) (id, key string) {
	e.t.Helper()
	if caps == nil {
		caps = []string{}
	}
	r := e.do("POST", "/api/v1/agents", "", map[string]any{"name": name, "operator": "tests", "capabilities": caps})
	if r.status != 201 {
		e.t.Fatalf("register: %d %s", r.status, r.body)
	}
	var a apiv1.AgentCreated
	json.Unmarshal(r.body, &a)
	return a.ID, a.APIKey
}

func (e *env) submit(key, title string) string {
	e.t.Helper()
	r := e.do("POST", "/api/v1/claims", key, map[string]any{"manifest": string(sqlstoretest.ManifestJSON(title)), "field": "statistics"})
	if r.status != 201 {
		e.t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var c apiv1.ClaimView
	json.Unmarshal(r.body, &c)
	return c.ID
}

func expect(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" {
		e := r.err()
		if e.Error != code || len(e.Detail) == 0 {
			t.Fatalf("error %q detail %q, want %q with detail", e.Error, e.Detail, code)
		}
		if want := apiv1.ErrorStatus(code); r.status != want {
			t.Fatalf("%q answered %d, but apiv1's table gives %d", code, r.status, want)
		}
	}
}

func TestStatus(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	r := e.do("GET", "/api/v1/status", "", nil)
	var s apiv1.Status
	json.Unmarshal(r.body, &s)
	if r.status != 200 || s.Features["bounties"] || s.Features["stakes"] || s.Features["markets"] || !s.Features["claims"] {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
}

func TestErrorCodes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		runnerID, runnerKey := e.register("runner")
		_, otherKey := e.register("other")
		id := e.submit(subKey, "claim one")

		// 401: missing and wrong key.
		expect(t, e.do("GET", "/api/v1/agents/me", "", nil), 401, "unauthorized")
		expect(t, e.do("GET", "/api/v1/jobs/next", "dlk_wrong", nil), 401, "unauthorized")
		// 404: unknown claim, agent and run (not_found); unknown route (no_such_route).
		expect(t, e.do("GET", "/api/v1/claims/DL-9999", "", nil), 404, "not_found")
		expect(t, e.do("GET", "/api/v1/agents/ag_missing", "", nil), 404, "not_found")
		expect(t, e.do("GET", "/api/v1/runs/run_missing", "", nil), 404, "not_found")
		expect(t, e.do("GET", "/api/v1/markets", "", nil), 404, "no_such_route")
		// 409: duplicate manifest (same canonical JSON, other whitespace).
		again := strings.ReplaceAll(string(sqlstoretest.ManifestJSON("claim one")), "\n", " ")
		r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"manifest": again, "field": "statistics"})
		expect(t, r, 409, "duplicate")
		if !strings.Contains(r.err().Detail[0], id) {
			t.Fatalf("duplicate detail should name %s: %q", id, r.err().Detail)
		}
		// 422: invalid manifest, every problem by path.
		bad := strings.Replace(string(sqlstoretest.ManifestJSON("bad")), `"seed": 1908`, `"sede": 1908`, 1)
		bad = strings.Replace(bad, `"value": 1.58`, `"value": "1.58"`, 1)
		r = e.do("POST", "/api/v1/claims", subKey, map[string]any{"manifest": bad, "field": "statistics"})
		expect(t, r, 422, "invalid")
		if d := strings.Join(r.err().Detail, "\n"); !strings.Contains(d, "sede") || !strings.Contains(d, "$.targets[0].value") {
			t.Fatalf("detail: %s", d)
		}
		// 422: unknown field in the request body, named.
		r = e.do("POST", "/api/v1/claims", subKey, map[string]any{"manifest": "{}", "field": "x", "bounty": 5})
		expect(t, r, 422, "invalid")
		if !strings.Contains(r.err().Detail[0], "bounty") {
			t.Fatalf("unknown field not named: %q", r.err().Detail)
		}
		// 422: malformed JSON, duplicate keys.
		expect(t, e.do("POST", "/api/v1/agents", "", `{"name":"a","name":"b","operator":"x"}`), 422, "invalid")
		expect(t, e.do("POST", "/api/v1/agents", "", `{"name":`), 422, "invalid")
		// 413: over the body limit, naming it.
		r = e.do("POST", "/api/v1/claims", subKey, map[string]any{"manifest": strings.Repeat("x", 70<<10), "field": "x"})
		expect(t, r, 413, "too_large")
		if !strings.Contains(r.err().Detail[0], "65536") {
			t.Fatalf("limit not named: %q", r.err().Detail)
		}
		// The draw: submitter gets 204, runner gets the claim.
		if r := e.do("GET", "/api/v1/jobs/next", subKey, nil); r.status != 204 {
			t.Fatalf("submitter drew its own claim: %d %s", r.status, r.body)
		}
		r = e.do("GET", "/api/v1/jobs/next", runnerKey, nil)
		var job dotlab.Job
		json.Unmarshal(r.body, &job)
		if r.status != 200 || job.ID != id || job.ManifestURL != "/api/v1/claims/"+id+"/manifest" {
			t.Fatalf("next: %d %s", r.status, r.body)
		}
		// 409: accepting a job not offered to you.
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", otherKey, nil), 409, "not_offered")
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 200, "")
		// 409: publishing a job that is not yours.
		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		expect(t, e.do("POST", "/api/v1/runs", otherKey, body), 409, "not_offered")
		// 422: outcome_mismatch, naming the differing comparison.
		body.Outcome = dotlab.OutcomeNotReproduced
		r = e.do("POST", "/api/v1/runs", runnerKey, body)
		expect(t, r, 422, "outcome_mismatch")
		// 422: missing, unknown and duplicate target names.
		for _, cs := range [][]dotlab.RunComparison{
			{{Name: "mean_diff", Rerun: "1.58"}},
			{{Name: "mean_diff", Rerun: "1.58"}, {Name: "sd_diff", Rerun: "1.17"}, {Name: "t", Rerun: "4"}},
			{{Name: "mean_diff", Rerun: "1.58"}, {Name: "mean_diff", Rerun: "1.58"}, {Name: "sd_diff", Rerun: "1.17"}},
		} {
			b := sqlstoretest.RunBody(id, "0", "0", dotlab.OutcomeReproduced)
			b.Comparisons = cs
			expect(t, e.do("POST", "/api/v1/runs", runnerKey, b), 422, "invalid")
		}
		// A rerun value written as a string is a type error, by path.
		r = e.do("POST", "/api/v1/runs", runnerKey, `{"job_id":"`+id+`","input_hashes":{},"output_hashes":{},"environment":{"image_digest":""},"comparisons":[{"name":"mean_diff","rerun":"1.58"}],"outcome":"reproduced"}`)
		expect(t, r, 422, "invalid")
		// 201: the run; the server recomputed the comparisons.
		body.Outcome = dotlab.OutcomeReproduced
		r = e.do("POST", "/api/v1/runs", runnerKey, body)
		expect(t, r, 201, "")
		var run dotlab.Run
		json.Unmarshal(r.body, &run)
		if run.RunnerID != runnerID || len(run.Comparisons) != 2 || !run.Comparisons[0].Match || run.Status != dotlab.StateChallengeWindow {
			t.Fatalf("run: %s", r.body)
		}
		// 409: the window for publishing is closed now (already published).
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 409, "conflict")
		r = e.do("GET", "/api/v1/runs?status=challenge_window", "", nil)
		if r.status != 200 || !strings.Contains(string(r.body), run.ID) {
			t.Fatalf("runs in window: %s", r.body)
		}
		expect(t, e.do("GET", "/api/v1/runs?status=bogus", "", nil), 422, "invalid")
		expect(t, e.do("GET", "/api/v1/claims?limit=201", "", nil), 422, "invalid")
	})
}

func TestOfferWindowClosed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		id := e.submit(subKey, "c")
		e.do("GET", "/api/v1/jobs/next", runnerKey, nil)
		e.clock.Advance(time.Hour + time.Second)
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 409, "window_closed")
	})
}

func TestManifestExactlyAsSubmittedAndPaging(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	_, key := e.register("s")
	for i := 0; i < 3; i++ {
		e.submit(key, fmt.Sprintf("claim %d", i))
	}
	r := e.do("GET", "/api/v1/claims/DL-0002/manifest", "", nil)
	if !bytes.Equal(r.body, sqlstoretest.ManifestJSON("claim 1")) {
		t.Fatalf("manifest not byte-identical:\n%s", r.body)
	}
	r = e.do("GET", "/api/v1/claims?limit=2", "", nil)
	var page apiv1.ClaimPage
	json.Unmarshal(r.body, &page)
	if len(page.Claims) != 2 || page.Next != "DL-0002" {
		t.Fatalf("page: %s", r.body)
	}
	r = e.do("GET", "/api/v1/claims?limit=2&after="+page.Next, "", nil)
	page = apiv1.ClaimPage{}
	json.Unmarshal(r.body, &page)
	if len(page.Claims) != 1 || page.Claims[0].ID != "DL-0003" || page.Next != "" {
		t.Fatalf("page 2: %s", r.body)
	}
}

func TestPanicsAreNotLeaked(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	// A body with a NUL inside a manifest string must not crash anything;
	// whatever happens, no Go error text reaches the client.
	r := e.do("POST", "/api/v1/agents", "", "{\"name\":\"\\u0000\",\"operator\":\"x\"}")
	if r.status >= 500 || strings.Contains(string(r.body), "goroutine") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	r := e.do("DELETE", "/api/v1/claims", "", nil)
	if r.status != 405 || r.header.Get("Allow") != "GET, POST" || r.err().Error != "method_not_allowed" {
		t.Fatalf("%d %q %s", r.status, r.header.Get("Allow"), r.body)
	}
	expect(t, e.do("GET", "/api/v1/nothing-here", "", nil), 404, "no_such_route")
}

func TestNULIsRejectedNotStored(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		r := e.do("POST", "/api/v1/agents", "", `{"name":"a\u0000b","operator":"o"}`)
		expect(t, r, 422, "invalid")
		if !strings.Contains(r.err().Detail[0], "$.name") {
			t.Fatalf("path not named: %q", r.err().Detail)
		}
		r = e.do("POST", "/api/v1/agents", "", []byte("\xef\xbb\xbf{\"name\":\"a\",\"operator\":\"o\"}"))
		expect(t, r, 422, "invalid")
	})
}

// A failure inside the server is 500 "internal" with a generic detail: no
// Go error text, no SQL, no paths reach the client.
func TestInternalErrorsAreNotLeaked(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, key := e.register("a")
		e.db.Close() // the database goes away under the server
		for _, r := range []resp{
			e.do("GET", "/api/v1/claims/DL-0001", "", nil),
			e.do("GET", "/api/v1/claims", "", nil),
			e.do("POST", "/api/v1/agents", "", map[string]any{"name": "b", "operator": "o"}),
		} {
			expect(t, r, 500, "internal")
			low := strings.ToLower(string(r.body))
			for _, leak := range []string{"sql", "closed", "database", ".go", "goroutine"} {
				if strings.Contains(low, leak) {
					t.Fatalf("internal text %q leaked: %s", leak, r.body)
				}
			}
		}
		_ = key
	})
}

// The claim view with its spliced, cached manifest decodes to the same claim
// and manifest as the store holds.
func TestClaimViewCarriesTheManifest(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	_, key := e.register("s")
	id := e.submit(key, "view")
	for i := 0; i < 2; i++ { // cold and cached
		r := e.do("GET", "/api/v1/claims/"+id, "", nil)
		var v apiv1.ClaimView
		if err := json.Unmarshal(r.body, &v); err != nil || v.Manifest == nil || v.Manifest.Title != "view" || v.ID != id || v.LabURL == "" {
			t.Fatalf("view %d: %v %s", i, err, r.body)
		}
		if len(v.Manifest.Targets) != 2 || v.Manifest.Targets[0].Value != "1.58" {
			t.Fatalf("manifest: %+v", v.Manifest)
		}
	}
}

// publishAndRead posts a run body as the agent with key, expects 201, and
// returns the run as GET /runs/{id} reads it back.
func (e *env) publishAndRead(key string, body *dotlab.RunBody) dotlab.Run {
	e.t.Helper()
	r := e.do("POST", "/api/v1/runs", key, body)
	expect(e.t, r, 201, "")
	var created dotlab.Run
	if err := json.Unmarshal(r.body, &created); err != nil {
		e.t.Fatal(err)
	}
	r = e.do("GET", "/api/v1/runs/"+created.ID, "", nil)
	expect(e.t, r, 200, "")
	var got dotlab.Run
	if err := json.Unmarshal(r.body, &got); err != nil {
		e.t.Fatal(err)
	}
	return got
}
