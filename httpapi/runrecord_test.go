package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// run reads GET /api/v1/runs/{id}.
func (e *env) run(id string) dotlab.Run {
	e.t.Helper()
	r := e.do("GET", "/api/v1/runs/"+id, "", nil)
	var run dotlab.Run
	if r.status != 200 || json.Unmarshal(r.body, &run) != nil {
		e.t.Fatalf("run %s: %d %s", id, r.status, r.body)
	}
	return run
}

// TestRunLogs is docs/protocol.md §6 "Logs" over HTTP: the run pins the
// SHA-256 of its logs, the runner uploads them afterwards, only those
// bytes, once; the same bytes again are 200; the answer and GET /runs/{id}
// carry the server's coverage judgement.
func TestRunLogs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, otherKey := e.register("other")
		id := e.assigned(subKey, runnerKey, "logs")
		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		logs := sqlstoretest.Logs(body)
		put := "/api/v1/jobs/" + id + "/logs"
		expect(t, e.do("PUT", put, runnerKey, logs), 409, "window_closed") // publish first

		body.LogsSHA256 = "ABC"
		r := e.do("POST", "/api/v1/runs", runnerKey, body)
		expect(t, r, 422, "invalid")
		if !strings.Contains(r.err().Detail[0], "$.logs_sha256") {
			t.Fatalf("bad logs_sha256 not named: %q", r.err().Detail)
		}
		body.LogsSHA256 = hexSHA256(logs)
		body.LogsURI = "https://logs.example.org/" + id + "/logs.jsonl"
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 201, "")
		var runID string
		{
			var page apiv1.RunPage
			json.Unmarshal(e.do("GET", "/api/v1/runs", "", nil).body, &page)
			runID = page.Runs[0].ID
		}
		if run := e.run(runID); run.LogsSHA256 != body.LogsSHA256 || run.Body.LogsSHA256 != body.LogsSHA256 || run.LogCoverage != nil || run.LogsUploadedAt != nil {
			t.Fatalf("published run: %+v", run)
		}
		expect(t, e.do("GET", put, "", nil), 404, "not_found")

		expect(t, e.do("PUT", put, otherKey, logs), 409, "not_offered")
		expect(t, e.do("PUT", put, runnerKey, `{"t":"x"}`+"\nnot json\n"), 422, "invalid")
		r = e.do("PUT", put, runnerKey, sqlstoretest.Logs(body, "compare"))
		expect(t, r, 422, "invalid")
		if !strings.Contains(r.err().Detail[0], "pins logs_sha256 "+body.LogsSHA256) {
			t.Fatalf("hash mismatch detail: %q", r.err().Detail)
		}
		var first apiv1.LogsStored
		r = e.do("PUT", put, runnerKey, logs)
		expect(t, r, 200, "")
		json.Unmarshal(r.body, &first)
		firstBody := string(r.body)
		if first.SHA256 != body.LogsSHA256 || first.Bytes != len(logs) || first.RunID != runID || first.LogsURI != "/api/v1/jobs/"+id+"/logs" ||
			first.LogCoverage == nil || !first.LogCoverage.Complete || first.LogCoverage.Covered != 7 {
			t.Fatalf("stored: %s", r.body)
		}
		r = e.do("PUT", put, runnerKey, logs) // idempotent
		expect(t, r, 200, "")
		if string(r.body) != firstBody {
			t.Fatalf("repeat answered %s", r.body)
		}
		expect(t, e.do("PUT", put, runnerKey, sqlstoretest.Logs(body, "outputs")), 409, "conflict")
		got := e.do("GET", put, "", nil)
		if got.status != 200 || string(got.body) != string(logs) || got.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("logs: %d %q", got.status, got.body)
		}
		run := e.run(runID)
		if run.LogsUploadedAt == nil || run.LogCoverage == nil || !run.LogCoverage.Complete || len(run.LogCoverage.Items) != 7 {
			t.Fatalf("run after upload: %+v", run)
		}

		// A run as the skill prints it, without logs_sha256: no logs can be attached.
		id2 := e.assigned(subKey, runnerKey, "no logs")
		body2 := sqlstoretest.RunBody(id2, "1.58", "1.17", dotlab.OutcomeReproduced)
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body2), 201, "")
		r = e.do("PUT", "/api/v1/jobs/"+id2+"/logs", runnerKey, sqlstoretest.Logs(body2))
		expect(t, r, 409, "conflict")
		if !strings.Contains(r.err().Detail[0], "without logs_sha256") {
			t.Fatalf("detail: %q", r.err().Detail)
		}
	})
}

// TestLogsUploadCheapChecksFirst: an upload is refused on who sends it and
// on its hash before its lines are parsed and screened for secrets (each
// costs seconds for 8 MiB), so a stranger or a mismatching body costs the
// server one hash: a stranger's malformed, key-bearing 8 MiB log is
// 409 not_offered, the runner's is 422 for its hash, not for its lines
// (docs/protocol.md §6 "Logs").
func TestLogsUploadCheapChecksFirst(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, otherKey := e.register("other")
		id := e.assigned(subKey, runnerKey, "cheap checks")
		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		logs := sqlstoretest.Logs(body)
		body.LogsSHA256 = hexSHA256(logs)
		put := "/api/v1/jobs/" + id + "/logs"
		hostile := strings.Repeat("not a log line, key AKIAZ7Q4MX2LPJRT3WKD\n", (8<<20)/42)
		expect(t, e.do("PUT", put, runnerKey, hostile), 409, "window_closed")
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 201, "")
		expect(t, e.do("PUT", put, otherKey, hostile), 409, "not_offered")
		r := e.do("PUT", put, runnerKey, hostile)
		if expect(t, r, 422, "invalid"); !strings.Contains(r.err().Detail[0], "pins logs_sha256 "+body.LogsSHA256) {
			t.Fatalf("a mismatching body was parsed: %q", r.err().Detail)
		}
		expect(t, e.do("PUT", put, runnerKey, logs), 200, "")
		expect(t, e.do("PUT", put, runnerKey, hostile), 409, "conflict")
		expect(t, e.do("PUT", put, runnerKey, logs), 200, "")
	})
}

// TestLogCoverageOverHTTP: a log missing the comparisons is judged
// incomplete, naming each missing comparison, on the PUT answer and on
// GET /runs/{id}; standing rewards only the complete log
// (docs/mechanism.md §6).
func TestLogCoverageOverHTTP(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		fullID, fullKey := e.register("runner-full")
		partID, partKey := e.register("runner-partial")
		var runs []string
		for i, rn := range []struct {
			key     string
			without []string
		}{{fullKey, nil}, {partKey, []string{"compare"}}} {
			id := e.assigned(subKey, rn.key, fmt.Sprintf("coverage %d", i))
			body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
			logs := sqlstoretest.Logs(body, rn.without...)
			body.LogsSHA256 = hexSHA256(logs)
			r := e.do("POST", "/api/v1/runs", rn.key, body)
			expect(t, r, 201, "")
			var run dotlab.Run
			json.Unmarshal(r.body, &run)
			runs = append(runs, run.ID)
			expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/logs", rn.key, logs), 200, "")
		}
		part := e.run(runs[1]).LogCoverage
		if part == nil || part.Complete || part.Required != 7 || part.Covered != 5 || len(part.Missing) != 2 {
			t.Fatalf("partial coverage: %+v", part)
		}
		for i, name := range []string{"mean_diff", "sd_diff"} {
			if !strings.HasPrefix(part.Missing[i], "comparison "+name+": a \"compare\" line with data.name \""+name+"\"") {
				t.Errorf("missing[%d] = %q", i, part.Missing[i])
			}
		}
		for _, it := range part.Items {
			if it.Covered == (it.Kind == dotlab.LogItemComparison) {
				t.Errorf("item %+v", it)
			}
		}
		e.clock.Advance(dotlab.DefaultWindows.Challenge)
		if _, err := sqlstoretest.Protocol(e.db).Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]float64{fullID: 1.5, partID: 1} {
			var p dotlab.AgentProfile
			json.Unmarshal(e.do("GET", "/api/v1/agents/"+id, "", nil).body, &p)
			if p.Standing != want || p.RunsUpheld != 1 || p.RunsWellLogged != int(2*(want-1)) {
				t.Errorf("%s: %+v, want standing %v", p.Name, p, want)
			}
		}
	})
}

// TestOverturnedRunRecord: after a dispute the challenger side wins, the
// official run keeps its own outcome and says how the claim settled, by
// which dispute and challenge; the runner's profile counts it overturned. A
// run the dispute upholds says so too (docs/protocol.md §6 "The run
// record").
func TestOverturnedRunRecord(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		runnerID, runnerKey := e.register("runner")
		_, chKey := e.register("challenger")
		var reviewers []string
		for i := 0; i < 3; i++ {
			_, key := e.register(fmt.Sprintf("reviewer%d", i))
			reviewers = append(reviewers, key)
		}
		dispute := func(title string, votes ...string) (runID, chID string) {
			id := e.assigned(subKey, runnerKey, title)
			r := e.do("POST", "/api/v1/runs", runnerKey, sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced))
			expect(t, r, 201, "")
			var run dotlab.Run
			json.Unmarshal(r.body, &run)
			if run.Overturned || run.SettledOutcome != "" || run.DisputeID != "" {
				t.Fatalf("fresh run: %s", r.body)
			}
			ch := dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: id, Agrees: new(bool)}
			ch.Notes = "sd_diff: 1.17 (divide by n) vs the run's 1.2299, difference 0.0599"
			r = e.do("POST", "/api/v1/challenges", chKey, ch)
			expect(t, r, 201, "")
			var c dotlab.Challenge
			json.Unmarshal(r.body, &c)
			if got := e.run(run.ID); got.DisputeID != id || got.Overturned || got.SettledOutcome != "" {
				t.Fatalf("disputed run: %+v", got)
			}
			for i, v := range votes {
				if r := e.do("GET", "/api/v1/disputes/next", reviewers[i], nil); r.status != 200 {
					t.Fatalf("reviewer %d: %d %s", i, r.status, r.body)
				}
				expect(t, e.do("POST", "/api/v1/disputes/"+id+"/vote", reviewers[i],
					map[string]string{"vote": v, "rationale": "sd_diff: Student divides by n, 1.17 vs 1.2299"}), 200, "")
			}
			return run.ID, c.ID
		}
		overturned, chID := dispute("overturned", "challenger", "challenger", "runner")
		run := e.run(overturned)
		if run.Outcome != dotlab.OutcomeNotReproduced || run.SettledOutcome != dotlab.OutcomeReproduced || !run.Overturned ||
			run.DisputeID != run.ClaimID || run.OverturnedBy != chID || run.Status != dotlab.StateSettled {
			t.Fatalf("overturned run: %+v", run)
		}
		upheld, _ := dispute("upheld", "runner", "runner", "challenger")
		run = e.run(upheld)
		if run.SettledOutcome != dotlab.OutcomeNotReproduced || run.Overturned || run.DisputeID != run.ClaimID || run.OverturnedBy != "" {
			t.Fatalf("upheld run: %+v", run)
		}
		var p dotlab.AgentProfile
		json.Unmarshal(e.do("GET", "/api/v1/agents/"+runnerID, "", nil).body, &p)
		if p.RunsOverturned != 1 || p.RunsUpheld != 1 || p.Outcomes[dotlab.OutcomeNotReproduced] != 2 ||
			p.Standing != dotlab.WeightRunUpheld+dotlab.WeightRunOverturned {
			t.Fatalf("profile: %+v", p)
		}
	})
}
