package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// publicFixture: claim A offered to decliner (declined), then to runner
// (accepted, spec_issue published → settled at once); claim B listed and
// left funded. The clock moves 10 ms between steps.
func publicFixture(t *testing.T, e *env) (a, b, runnerID, declinerID, runID string) {
	_, subKey := e.register("submitter")
	runnerID, runnerKey := e.register("runner")
	declinerID, declinerKey := e.register("decliner")
	step := func() { e.clock.Advance(10 * time.Millisecond) }
	a = e.submit(subKey, "public A")
	step()
	expect(t, e.do("GET", "/api/v1/jobs/next", declinerKey, nil), 200, "")
	step()
	expect(t, e.do("POST", "/api/v1/jobs/"+a+"/decline", declinerKey, map[string]string{"reason": "no time today"}), 200, "")
	step()
	expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
	step()
	expect(t, e.do("POST", "/api/v1/jobs/"+a+"/accept", runnerKey, nil), 200, "")
	step()
	body := sqlstoretest.RunBody(a, "0", "0", dotlab.OutcomeSpecIssue)
	body.Comparisons = nil
	body.Notes = "results.json missing: analysis.py exited 1"
	r := e.do("POST", "/api/v1/runs", runnerKey, body)
	expect(t, r, 201, "")
	var run dotlab.Run
	json.Unmarshal(r.body, &run)
	step()
	b = e.submit(subKey, "public B")
	return a, b, runnerID, declinerID, run.ID
}

func TestSummaryOverHTTP(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		r := e.do("GET", "/api/v1/summary", "", nil)
		expect(t, r, 200, "")
		if !strings.Contains(string(r.body), `"recently_settled":[]`) || !strings.Contains(string(r.body), `"total":0`) {
			t.Fatalf("empty summary: %s", r.body)
		}
		a, b, _, _, runID := publicFixture(t, e)
		r = e.do("GET", "/api/v1/summary", "", nil)
		expect(t, r, 200, "")
		var raw struct {
			Total           int                          `json:"total"`
			ClaimsByState   map[string]int               `json:"claims_by_state"`
			RecentlySettled []map[string]json.RawMessage `json:"recently_settled"`
		}
		if err := json.Unmarshal(r.body, &raw); err != nil {
			t.Fatal(err)
		}
		if raw.Total != 2 || len(raw.ClaimsByState) != len(dotlab.ClaimStates) {
			t.Fatalf("summary: %s", r.body)
		}
		for _, st := range dotlab.ClaimStates {
			want := map[dotlab.ClaimState]int{dotlab.StateSettled: 1, dotlab.StateFunded: 1}[st]
			if n, ok := raw.ClaimsByState[string(st)]; !ok || n != want {
				t.Fatalf("%s: %d (present %v), want %d: %s", st, n, ok, want, r.body)
			}
		}
		if len(raw.RecentlySettled) != 1 {
			t.Fatalf("recently settled: %s", r.body)
		}
		c := raw.RecentlySettled[0]
		if _, ok := c["manifest"]; ok {
			t.Fatalf("manifest in the summary: %s", r.body)
		}
		if string(c["id"]) != `"`+a+`"` || string(c["lab_url"]) != `"/labs/`+a+`"` || string(c["run_url"]) != `"/api/v1/runs/`+runID+`"` ||
			string(c["outcome"]) != `"spec_issue"` || c["settled_at"] == nil {
			t.Fatalf("settled claim: %s", r.body)
		}
		var v apiv1.SummaryView
		json.Unmarshal(e.do("GET", "/api/v1/summary?recent=50", "", nil).body, &v)
		if len(v.RecentlySettled) != 1 || v.RecentlySettled[0].ID == b {
			t.Fatalf("recent=50: %+v", v)
		}
		for _, q := range []string{"51", "-1", "x", "1.5"} {
			r := e.do("GET", "/api/v1/summary?recent="+q, "", nil)
			expect(t, r, 422, "invalid")
			if d := r.err().Detail[0]; !strings.HasPrefix(d, "recent: ") {
				t.Fatalf("recent=%s: detail %q does not name the parameter", q, d)
			}
		}
	})
}

func TestAgentActivityOverHTTP(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		a, _, runnerID, declinerID, runID := publicFixture(t, e)
		get := func(path string) []dotlab.Activity {
			t.Helper()
			r := e.do("GET", path, "", nil)
			expect(t, r, 200, "")
			var p apiv1.ActivityPage
			if err := json.Unmarshal(r.body, &p); err != nil || p.Activity == nil {
				t.Fatalf("%s: %s %v", path, r.body, err)
			}
			return p.Activity
		}
		kinds := func(as []dotlab.Activity) string {
			var k []string
			for _, x := range as {
				k = append(k, x.Kind+":"+x.ClaimID+":"+x.Ref+":"+x.Detail)
			}
			return strings.Join(k, " ")
		}
		got := get("/api/v1/agents/" + runnerID + "/activity")
		if want := "run:" + a + ":" + runID + ":spec_issue job_accepted:" + a + ":: job_offered:" + a + "::"; kinds(got) != want {
			t.Fatalf("runner: %s, want %s", kinds(got), want)
		}
		if t0 := sqlstoretest.NewClock().Now(); !got[0].At.Equal(t0.Add(50*time.Millisecond)) || !got[2].At.Equal(t0.Add(30*time.Millisecond)) {
			t.Fatalf("times: %+v", got)
		}
		if got := get("/api/v1/agents/" + runnerID + "/activity?limit=1"); len(got) != 1 || got[0].Kind != "run" {
			t.Fatalf("limit=1: %+v", got)
		}
		got = get("/api/v1/agents/" + declinerID + "/activity?limit=200")
		if want := "job_declined:" + a + "::no time today job_offered:" + a + "::"; kinds(got) != want {
			t.Fatalf("decliner: %s, want %s", kinds(got), want)
		}
		idle, _ := e.register("idle")
		r := e.do("GET", "/api/v1/agents/"+idle+"/activity", "", nil)
		if r.status != 200 || !strings.Contains(string(r.body), `{"activity":[]}`) {
			t.Fatalf("idle: %d %s", r.status, r.body)
		}
		expect(t, e.do("GET", "/api/v1/agents/ag_nope/activity", "", nil), 404, "not_found")
		for _, q := range []string{"201", "-1", "x"} {
			r := e.do("GET", "/api/v1/agents/"+runnerID+"/activity?limit="+q, "", nil)
			expect(t, r, 422, "invalid")
			if d := r.err().Detail[0]; !strings.HasPrefix(d, "limit: ") {
				t.Fatalf("limit=%s: detail %q does not name the parameter", q, d)
			}
		}
		// Only GET is served.
		expect(t, e.do("POST", "/api/v1/agents/"+runnerID+"/activity", "", nil), 405, "method_not_allowed")
		expect(t, e.do("POST", "/api/v1/summary", "", nil), 405, "method_not_allowed")
	})
}
