package httpapi_test

// Tests of what an agent that follows agent-skill-dotlab.txt word for word
// meets (docs/agents.md): a value-free run listing for challengers, a route that
// does not exist told apart from a record that does not, declining without
// a reason, https logs, hints that lead somewhere, and rationales tied to
// the dispute's targets. Each runs against a real server on SQLite and
// PostgreSQL.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/skilltext"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// published lists a claim, has runnerKey accept it and publish a
// not_reproduced run (sd_diff 1.2299 against 1.17 ± 0.005) with notes and an
// https logs_uri, and returns the claim id and the run.
func (e *env) published(subKey, runnerKey, title string) (string, dotlab.Run) {
	e.t.Helper()
	id := e.assigned(subKey, runnerKey, title)
	body := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	body.Notes = "runner notes: sd_diff divides by n-1"
	body.LogsURI = "https://logs.example.org/" + id + "/logs.jsonl"
	r := e.do("POST", "/api/v1/runs", runnerKey, body)
	expect(e.t, r, 201, "")
	var run dotlab.Run
	if err := json.Unmarshal(r.body, &run); err != nil {
		e.t.Fatal(err)
	}
	return id, run
}

// challengeBody is a reproduced rerun of the sqlstoretest manifest
// (sd_diff 1.17) that disagrees with a not_reproduced run.
func challengeBody(id, notes string) map[string]any {
	b := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
	return map[string]any{"claim_id": id, "agrees": false, "input_hashes": b.InputHashes, "output_hashes": b.OutputHashes,
		"environment": b.Environment, "comparisons": b.Comparisons, "outcome": "reproduced", "notes": notes}
}

// Item 1: the challenger's listing, GET /runs?status=challenge_window (and
// GET /runs, GET /claims, GET /claims/{id}), gives what a challenger needs
// and none of the runner's values; GET /runs/{id} keeps them. The 422 for a
// vague disagreeing note does not quote the runner's value either.
func TestRunListingHidesTheRunnersValues(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, chKey := e.register("challenger")
		id, run := e.published(subKey, runnerKey, "listing without values")
		// The run's values and notes, and (in run listings) the fields
		// that would carry them.
		values := []string{"1.2299", "n-1", "logs.example.org", "comparisons", "rerun", "notes", "logs_uri", "input_hashes", "output_hashes", `"body"`}
		fields := []string{"environment", "image_digest", sqlstoretest.DataSHA256, "differences"}
		for _, path := range []string{"/api/v1/runs?status=challenge_window", "/api/v1/runs", "/api/v1/claims?state=challenge_window",
			"/api/v1/claims", "/api/v1/claims/" + id, "/api/v1/summary"} {
			r := e.do("GET", path, "", nil)
			expect(t, r, 200, "")
			hidden := values
			if strings.HasPrefix(path, "/api/v1/runs") {
				hidden = append(append([]string(nil), values...), fields...)
			}
			for _, s := range hidden {
				if strings.Contains(string(r.body), s) {
					t.Errorf("GET %s shows %q of the run: %s", path, s, r.body)
				}
			}
		}
		r := e.do("GET", "/api/v1/runs?status=challenge_window", "", nil)
		var page apiv1.RunPage
		if err := json.Unmarshal(r.body, &page); err != nil || len(page.Runs) != 1 {
			t.Fatalf("listing: %v %s", err, r.body)
		}
		l := page.Runs[0]
		if l.ID != run.ID || l.ClaimID != id || l.Title != "listing without values" || l.Requires == nil ||
			l.Outcome != dotlab.OutcomeNotReproduced || l.Status != dotlab.StateChallengeWindow || l.ChallengeDeadline == nil ||
			!l.ChallengeDeadline.Equal(*run.ChallengeDeadline) || !l.PublishedAt.Equal(run.PublishedAt) ||
			l.ManifestURL != "/api/v1/claims/"+id+"/manifest" || l.RunURL != "/api/v1/runs/"+run.ID {
			t.Fatalf("listing entry: %+v, run %+v", l, run)
		}
		// What the listing links to works: the manifest to rerun, and the
		// run with its values for whoever asks.
		if r := e.do("GET", l.ManifestURL, "", nil); r.status != 200 || !strings.Contains(string(r.body), `"targets"`) {
			t.Fatalf("manifest: %d %s", r.status, r.body)
		}
		if r := e.do("GET", l.RunURL, "", nil); r.status != 200 || !strings.Contains(string(r.body), "1.2299") || !strings.Contains(string(r.body), "n-1") {
			t.Fatalf("run: %d %s", r.status, r.body)
		}
		// A vague disagreeing note: the 422 names the comparison and the
		// challenger's own value, not the runner's value nor the difference.
		r = e.do("POST", "/api/v1/challenges", chKey, challengeBody(id, "the standard deviation differs"))
		expect(t, r, 422, "invalid")
		d := strings.Join(r.err().Detail, "\n")
		if !strings.Contains(d, `"sd_diff"`) || !strings.Contains(d, "1.17") || strings.Contains(d, "1.2299") || strings.Contains(d, "0.0599") {
			t.Fatalf("vague-note detail: %s", d)
		}
		expect(t, e.do("POST", "/api/v1/challenges", chKey, challengeBody(id, "sd_diff: 1.17 within tolerance, the run's value is 0.0599 above it")), 201, "")
	})
}

// Item 2: a route that does not exist is no_such_route, a record that does
// not exist is not_found; both details say what to do next.
func TestMissingRouteIsNotAMissingRecord(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, key := e.register("agent")
		for _, c := range []struct{ method, path, says string }{
			{"GET", "/api/v1/markets", "does not exist in DotLab's API v1"},
			{"POST", "/api/v1/stakes", "does not exist in DotLab's API v1"},
			{"GET", "/api/v1/claims/DL-0001/bounty", "does not exist in DotLab's API v1"},
			{"GET", "/api/v2/claims", "DotLab's API is v1, under /api/v1"},
		} {
			r := e.do(c.method, c.path, key, nil)
			expect(t, r, 404, dotlab.ENOSUCHROUTE)
			d := r.err().Detail[0]
			if !strings.Contains(d, c.says) || !strings.Contains(d, "GET /api/v1/status") || !strings.Contains(d, "/docs/protocol") {
				t.Errorf("%s %s: %q", c.method, c.path, d)
			}
		}
		for _, c := range []struct{ method, path, says string }{
			{"GET", "/api/v1/claims/DL-9999", "claim ids look like DL-0001; GET /api/v1/claims lists"},
			{"GET", "/api/v1/claims/DL-9999/manifest", "GET /api/v1/claims lists"},
			{"POST", "/api/v1/jobs/DL-9999/accept", "GET /api/v1/claims lists"},
			{"GET", "/api/v1/labs/DL-9999/messages", "GET /api/v1/claims lists"},
			{"GET", "/api/v1/agents/ag_missing", "agent ids look like ag_"},
			{"GET", "/api/v1/runs/run_missing", "run ids look like run_"},
		} {
			r := e.do(c.method, c.path, key, nil)
			expect(t, r, 404, dotlab.ENOTFOUND)
			if d := r.err().Detail[0]; !strings.Contains(d, c.says) {
				t.Errorf("%s %s: %q", c.method, c.path, d)
			}
		}
		// A route spelled with a trailing slash or in another letter case
		// is no_such_route too, but the detail names the route that is
		// there, not a missing feature.
		id := e.submit(key, "near routes")
		for _, c := range []struct{ method, path, route string }{
			{"GET", "/api/v1/claims/", "GET /api/v1/claims"},
			{"GET", "/api/v1/claims/" + id + "/", "GET /api/v1/claims/" + id},
			{"GET", "/api/v1/Claims/" + id + "/Manifest", "GET /api/v1/claims/" + id + "/manifest"},
			{"POST", "/api/v1/RUNS", "POST /api/v1/runs"},
			{"PUT", "/api/v1/jobs/" + id + "/logs/", "PUT /api/v1/jobs/" + id + "/logs"},
		} {
			r := e.do(c.method, c.path, key, nil)
			expect(t, r, 404, dotlab.ENOSUCHROUTE)
			if d := r.err().Detail[0]; !strings.Contains(d, "the route is "+c.route+":") || strings.Contains(d, "the feature is not there") {
				t.Errorf("%s %s: %q", c.method, c.path, d)
			}
		}
		// The hints work: the listings they name answer.
		expect(t, e.do("GET", "/api/v1/status", "", nil), 200, "")
		expect(t, e.do("GET", "/api/v1/claims", "", nil), 200, "")
		expect(t, e.do("GET", "/api/v1/runs", "", nil), 200, "")
		expect(t, e.do("GET", "/api/v1/agents/me", key, nil), 200, "")
	})
}

// Item 3: a decline with an empty body, with {} or with any free-text
// reason is accepted; only capability_mismatch is free of cost, the others
// are recorded as reasonless and lower standing by 0.25 each.
func TestDeclineWithoutAReason(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		runnerID, runnerKey := e.register("runner")
		for i := 0; i < 4; i++ {
			e.submit(subKey, fmt.Sprintf("decline %d", i))
		}
		draw := func() string {
			r := e.do("GET", "/api/v1/jobs/next", runnerKey, nil)
			var j dotlab.Job
			if r.status != 200 || json.Unmarshal(r.body, &j) != nil {
				t.Fatalf("next: %d %s", r.status, r.body)
			}
			return j.ID
		}
		// Refused, and the offer stays: a key-like reason, an over-long one.
		id := draw()
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/decline", runnerKey, `{"reason":"busy, key AKIAZ7Q4MX2LPJRT3WKD"}`), 422, "invalid")
		r := e.do("POST", "/api/v1/jobs/"+id+"/decline", runnerKey, map[string]string{"reason": strings.Repeat("x", 501)})
		if expect(t, r, 422, "invalid"); !strings.Contains(r.err().Detail[0], "$.reason") {
			t.Fatalf("long reason: %q", r.err().Detail)
		}
		// A body that is not a JSON object (a plain-text reason, an array, a
		// bare string) is refused with the bodies that work.
		for _, body := range []string{"busy this week", `["capability_mismatch"]`, `"capability_mismatch"`, `{"why":"busy"}`} {
			r := e.do("POST", "/api/v1/jobs/"+id+"/decline", runnerKey, body)
			expect(t, r, 422, "invalid")
			if d := strings.Join(r.err().Detail, "\n"); !strings.Contains(d, `no body, {} or {"reason": "<any text>"}`) {
				t.Fatalf("decline body %s: %q", body, d)
			}
		}
		for _, c := range []struct {
			body       any
			reason     string
			reasonless bool
		}{
			{nil, "", true},
			{"{}", "", true},
			{`{"reason":"  busy this week, sorry  "}`, "busy this week, sorry", true},
			{`{ "reason": "capability_mismatch" }`, "capability_mismatch", false},
		} {
			if id == "" {
				id = draw()
			}
			r := e.do("POST", "/api/v1/jobs/"+id+"/decline", runnerKey, c.body)
			expect(t, r, 200, "")
			var j dotlab.Job
			json.Unmarshal(r.body, &j)
			if j.State != dotlab.JobDeclined || j.Reason != c.reason || j.Reasonless != c.reasonless {
				t.Fatalf("decline with %v: %s", c.body, r.body)
			}
			if c.reasonless != strings.Contains(string(r.body), `"reasonless":true`) {
				t.Fatalf("reasonless on the wire: %s", r.body)
			}
			id = ""
		}
		var p dotlab.AgentProfile
		json.Unmarshal(e.do("GET", "/api/v1/agents/"+runnerID, "", nil).body, &p)
		want := map[string]int{dotlab.DeclineNoReason: 2, "busy this week, sorry": 1, dotlab.DeclineCapabilityMismatch: 1}
		if fmt.Sprint(p.Declines) != fmt.Sprint(want) || p.Standing != -0.75 {
			t.Fatalf("profile: declines %v standing %v, want %v and -0.75", p.Declines, p.Standing, want)
		}
		var act apiv1.ActivityPage
		json.Unmarshal(e.do("GET", "/api/v1/agents/"+runnerID+"/activity", "", nil).body, &act)
		declined := 0
		for _, a := range act.Activity {
			if a.Kind == "job_declined" {
				declined++
			}
		}
		if declined != 4 {
			t.Fatalf("activity: %d declines: %+v", declined, act.Activity)
		}
	})
}

// Item 5: logs_uri is an https URL on a public host; plain http and
// loopback hosts only when the operator allows private URLs (the demo and
// tests on loopback); link-local and metadata addresses never.
func TestLogsURIIsHTTPS(t *testing.T) {
	for _, eng := range sqlstoretest.Engines {
		t.Run(string(eng), func(t *testing.T) {
			strict := newEnv(t, eng)
			private := newEnvWith(t, eng, func(c *httpapi.Config) { c.AllowPrivateURLs = true })
			for i, c := range []struct {
				uri               string
				strictOK, privOK  bool
				strictSays, privS string
			}{
				{"https://logs.example.org/DL-0001/logs.jsonl", true, true, "", ""},
				{"http://logs.example.org/DL-0001/logs.jsonl", false, true, "use https://", ""},
				{"http://127.0.0.1:8080/api/v1/jobs/DL-0001/logs", false, true, "use https://", ""},
				{"https://127.0.0.1/logs", false, true, "loopback", ""},
				{"https://localhost/logs", false, true, "loopback", ""},
				{"http://169.254.169.254/latest", false, false, "cloud metadata", "cloud metadata"},
				{"https://169.254.10.10/logs", false, false, "link-local", "link-local"},
				{"https://user:pw@logs.example.org/x", false, false, "credentials", "credentials"},
				{"ftp://logs.example.org/x", false, false, "https", "https"},
				{"git://logs.example.org/x", false, false, "https", "https"},
				{"file:///var/log/run.jsonl", false, false, "https", "https"},
			} {
				for _, side := range []struct {
					e    *env
					ok   bool
					says string
				}{{strict, c.strictOK, c.strictSays}, {private, c.privOK, c.privS}} {
					e := side.e
					_, subKey := e.register("submitter")
					_, runnerKey := e.register("runner")
					id := e.assigned(subKey, runnerKey, fmt.Sprintf("logs uri %d", i))
					body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
					body.LogsURI = c.uri
					r := e.do("POST", "/api/v1/runs", runnerKey, body)
					if side.ok {
						expect(t, r, 201, "")
						continue
					}
					expect(t, r, 422, "invalid")
					if d := strings.Join(r.err().Detail, "\n"); !strings.HasPrefix(d, "$.logs_uri: ") || !strings.Contains(d, side.says) || strings.Contains(d, "pw@") {
						t.Errorf("%s (private %v): %q", c.uri, e == private, d)
					}
				}
			}
			// A challenge's logs_uri follows the same rule.
			_, subKey := strict.register("submitter")
			_, runnerKey := strict.register("runner")
			_, chKey := strict.register("challenger")
			id, _ := strict.published(subKey, runnerKey, "challenge logs")
			ch := challengeBody(id, "sd_diff: 1.17 is within tolerance; the run's value is 0.0599 above it")
			ch["logs_uri"] = "http://logs.example.org/ch.jsonl"
			r := strict.do("POST", "/api/v1/challenges", chKey, ch)
			if expect(t, r, 422, "invalid"); !strings.HasPrefix(r.err().Detail[0], "$.logs_uri: ") {
				t.Fatalf("challenge logs_uri: %q", r.err().Detail)
			}
			ch["logs_uri"] = "https://logs.example.org/ch.jsonl"
			expect(t, strict.do("POST", "/api/v1/challenges", chKey, ch), 201, "")
		})
	}
}

// Item 6: the submitter answers questions in its own room, and never runs,
// challenges or reviews its claim; a runner holding an offer is told to
// accept or decline first, not sent between runner and collaborator joins;
// every refusal in a room names a step that then works.
func TestRoomHintsLeadSomewhere(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		subID, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, strangerKey := e.register("stranger")
		_, chKey := e.register("challenger")
		join := func(key, id, role string) resp {
			return e.do("POST", "/api/v1/labs/"+id+"/join", key, map[string]string{"role": role})
		}
		post := func(key, id, body string) resp {
			return e.do("POST", "/api/v1/labs/"+id+"/messages", key, map[string]any{"type": "note", "to": "all", "body": body})
		}
		says := func(r resp, parts ...string) {
			t.Helper()
			d := strings.Join(r.err().Detail, "\n")
			for _, p := range parts {
				if !strings.Contains(d, p) {
					t.Fatalf("detail %q does not say %q", d, p)
				}
			}
		}

		// A runner holding an offer: both joins point at accept/decline.
		id := e.submit(subKey, "offered")
		expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
		for _, role := range []string{"runner", "collaborator"} {
			r := join(runnerKey, id, role)
			expect(t, r, 403, "role_conflict")
			says(r, "/api/v1/jobs/"+id+"/accept", "/api/v1/jobs/"+id+"/decline", "not yet accepted")
		}
		r := post(runnerKey, id, "may I?")
		expect(t, r, 403, "not_member")
		says(r, "/api/v1/jobs/"+id+"/accept")
		// Accepting, then joining as runner, works.
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 200, "")
		r = post(runnerKey, id, "starting")
		expect(t, r, 403, "not_member")
		says(r, `{"role":"runner"}`)
		expect(t, join(runnerKey, id, "runner"), 200, "")
		expect(t, post(runnerKey, id, "starting"), 201, "")
		// The submitter answers questions without joining; it becomes a
		// member as submitter, and still cannot run its claim.
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", runnerKey, map[string]any{"type": "question", "to": subID, "body": "which sd?"}), 201, "")
		expect(t, post(subKey, id, "Student divides by n"), 201, "")
		var ms apiv1.MemberList
		json.Unmarshal(e.do("GET", "/api/v1/labs/"+id+"/members", "", nil).body, &ms)
		roles := map[string]string{}
		for _, m := range ms.Members {
			roles[m.AgentID] = m.Role
		}
		if len(ms.Members) != 2 || roles[subID] != dotlab.RoleSubmitter {
			t.Fatalf("members: %+v", ms.Members)
		}
		r = join(subKey, id, "runner")
		expect(t, r, 403, "role_conflict")
		says(r, "/api/v1/labs/"+id+"/messages")
		if r := join(subKey, id, "submitter"); r.status != 200 || !strings.Contains(string(r.body), `"role":"submitter"`) {
			t.Fatalf("submitter joins again: %d %s", r.status, r.body)
		}
		// A stranger is told to join as collaborator, which then works.
		r = post(strangerKey, id, "hello")
		expect(t, r, 403, "not_member")
		says(r, `{"role":"collaborator"}`)
		r = join(strangerKey, id, "submitter")
		expect(t, r, 403, "role_conflict")
		says(r, `{"role":"collaborator"}`)
		expect(t, join(strangerKey, id, "collaborator"), 200, "")
		expect(t, post(strangerKey, id, "hello"), 201, "")

		// A declined offer: joining as collaborator then works.
		id2 := e.submit(subKey, "declined then helped")
		expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
		expect(t, join(runnerKey, id2, "collaborator"), 403, "role_conflict")
		expect(t, e.do("POST", "/api/v1/jobs/"+id2+"/decline", runnerKey, `{"reason":"capability_mismatch"}`), 200, "")
		expect(t, join(runnerKey, id2, "collaborator"), 200, "")

		// The submitter cannot challenge its claim; a challenger cannot post
		// in the room, and is told where to read it and find other runs.
		body := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 201, "")
		ch := challengeBody(id, "sd_diff: 1.17, within tolerance; the run is 0.0599 above")
		r = e.do("POST", "/api/v1/challenges", subKey, ch)
		expect(t, r, 403, "role_conflict")
		says(r, "GET /api/v1/runs?status=challenge_window")
		expect(t, e.do("POST", "/api/v1/challenges", chKey, ch), 201, "")
		r = post(chKey, id, "I disagree")
		expect(t, r, 403, "not_member")
		says(r, "GET /api/v1/labs/"+id+"/messages")
		r = join(chKey, id, "collaborator")
		expect(t, r, 403, "role_conflict")
		says(r, "GET /api/v1/labs/"+id+"/messages")
		expect(t, e.do("GET", "/api/v1/labs/"+id+"/messages", "", nil), 200, "")
		expect(t, e.do("GET", "/api/v1/runs?status=challenge_window", "", nil), 200, "")
		// The submitter is never drawn to review its own dispute.
		if r := e.do("GET", "/api/v1/disputes/next", subKey, nil); r.status != 204 {
			t.Fatalf("submitter drew its own dispute: %d %s", r.status, r.body)
		}
		r = e.do("POST", "/api/v1/disputes/"+id+"/vote", subKey, map[string]string{"vote": "runner", "rationale": "sd_diff: n-1 is what the paper used"})
		expect(t, r, 403, "role_conflict")
		says(r, "GET /api/v1/disputes/next")
	})
}

// Item 8: a vote's rationale names at least one target of the dispute, as
// a whole word in any case; otherwise 422 lists the targets.
func TestRationaleNamesATarget(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, chKey := e.register("challenger")
		id, _ := e.published(subKey, runnerKey, "rationale")
		expect(t, e.do("POST", "/api/v1/challenges", chKey, challengeBody(id, "sd_diff: 1.17 within tolerance, the run 0.0599 above")), 201, "")
		_, revKey := e.register("reviewer")
		expect(t, e.do("GET", "/api/v1/disputes/next", revKey, nil), 200, "")
		vote := func(rationale string) resp {
			return e.do("POST", "/api/v1/disputes/"+id+"/vote", revKey, map[string]string{"vote": "challenger", "rationale": rationale})
		}
		for _, bad := range []string{
			"I read all the evidence carefully and side with the challenger.",
			"the sd_diffs differ and the mean_diff_x too, so the challenger is right",
		} {
			r := vote(bad)
			expect(t, r, 422, "invalid")
			if d := r.err().Detail[0]; !strings.HasPrefix(d, "$.rationale: ") || !strings.Contains(d, "mean_diff, sd_diff") {
				t.Fatalf("rationale %q: %q", bad, d)
			}
		}
		r := vote("SD_DIFF: Student divides by n, so 1.17 is the published quantity")
		expect(t, r, 200, "")
	})
}

// skillManifest is a manifest that sets no seed, with one target whose
// published value is 0.0, so that the skill's example run body, "seed": 0
// and "rerun": 0.0 as printed, is a consistent reproduced run.
func skillManifest(title string) string {
	return sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: title, Dependencies: `{"python3": "3.11.2"}`,
		Targets: `[{"name": "median_shift", "value": 0.0, "tolerance": {"type": "absolute", "value": 0.005}}]`})
}

// The literal example bodies of agent-skill-dotlab.txt, as printed
// (internal/testing/skilltext): only the <placeholders> (and the "a | b" lists of
// choices) are filled in.
const (
	skillRegister = skilltext.Register
	skillDecline  = skilltext.Decline
	skillJoinRun  = skilltext.JoinRunner
	skillJoinCol  = skilltext.JoinCollaborator
	skillRun      = skilltext.Run
	skillVote     = skilltext.Vote
	skillMessage  = skilltext.Message
	skillClaim    = skilltext.Claim
)

// fill replaces each placeholder of a skill body with a value.
func fill(body string, kv ...string) string { return strings.NewReplacer(kv...).Replace(body) }

// Item 7: every literal example body of the skill text is accepted where
// it is consistent: the run body with "seed": 0 on a manifest that sets no
// seed, the same body as a challenge "plus claim_id and agrees", and the
// register, decline, join, message, claim and vote bodies.
func TestSkillLiteralBodies(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		keys := map[string]string{}
		ids := map[string]string{}
		for _, name := range []string{"submitter", "decliner", "runner", "helper", "challenger", "disagreer", "rev1", "rev2", "rev3"} {
			r := e.do("POST", "/api/v1/agents", "", fill(skillRegister, "<handle>", name, "<who runs you>", "the promises tests"))
			expect(t, r, 201, "")
			var a apiv1.AgentCreated
			json.Unmarshal(r.body, &a)
			keys[name], ids[name] = a.APIKey, a.ID
		}
		manifest, _ := json.Marshal(skillManifest("skill literal bodies"))
		r := e.do("POST", "/api/v1/claims", keys["submitter"], fill(skillClaim, `"<manifest JSON as text>"`, string(manifest), "<field>", "statistics"))
		expect(t, r, 201, "")
		var c apiv1.ClaimView
		json.Unmarshal(r.body, &c)
		id := c.ID
		// Declined with the skill's body, by one agent; accepted by another.
		expect(t, e.do("GET", "/api/v1/jobs/next", keys["decliner"], nil), 200, "")
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/decline", keys["decliner"], skillDecline), 200, "")
		expect(t, e.do("GET", "/api/v1/jobs/next", keys["runner"], nil), 200, "")
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", keys["runner"], nil), 200, "")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", keys["runner"], skillJoinRun), 200, "")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", keys["helper"], skillJoinCol), 200, "")
		for _, typ := range []string{"note", "question", "finding", "handoff", "blocker"} {
			msg := fill(skillMessage, "note | question | finding | handoff | blocker", typ, "<agent_id or all>", "all",
				"<plain text, under 1500 characters>", "sleep.csv hash checked", "<file or log line ids>", "logs.jsonl:3")
			expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", keys["helper"], msg), 201, "")
		}
		runOf := func(id, outcome, target, rerun string) string {
			return fill(skillRun, "<claim id, for example DL-0001>", id, "<dataset name>", "sleep", `"<sha256>" }`, `"`+sqlstoretest.DataSHA256+`" }`,
				"<file>", "results.json", "<digest>", sqlstoretest.ImageDigest, "reproduced | not_reproduced | spec_issue | input_mismatch", outcome,
				"<target name>", target, `"rerun": 0.0`, `"rerun": `+rerun,
				"<optional https URL of your full logs>", "https://logs.example.org/"+id+".jsonl",
				"<plain description of anything unusual, required for spec_issue and input_mismatch>", "nothing unusual")
		}
		run := func(outcome, rerun string) string { return runOf(id, outcome, "median_shift", rerun) }
		// "seed": 0 is accepted on a manifest that sets no seed; another
		// seed is not (it is not consistent with the manifest).
		r = e.do("POST", "/api/v1/runs", keys["runner"], strings.Replace(run("reproduced", "0.0"), `"seed": 0`, `"seed": 7`, 1))
		if expect(t, r, 422, "invalid"); !strings.Contains(r.err().Detail[0], "$.environment.seed") {
			t.Fatalf("seed 7: %q", r.err().Detail)
		}
		expect(t, e.do("POST", "/api/v1/runs", keys["runner"], run("reproduced", "0.0")), 201, "")
		// The challenge: "the same body as a run, plus claim_id and agrees".
		plus := func(body string, agrees bool) string {
			return strings.Replace(body, "{\n", fmt.Sprintf("{\n  \"claim_id\": %q,\n  \"agrees\": %v,\n", id, agrees), 1)
		}
		expect(t, e.do("POST", "/api/v1/challenges", keys["challenger"], plus(run("reproduced", "0.0"), true)), 201, "")
		disagree := strings.Replace(plus(run("not_reproduced", "0.5"), false), `"nothing unusual"`, `"median_shift: my rerun 0.5 vs the run's 0.0, difference 0.5"`, 1)
		expect(t, e.do("POST", "/api/v1/challenges", keys["disagreer"], disagree), 201, "")
		// The votes, with the skill's vote body.
		for i, side := range []string{"runner", "runner", "challenger"} {
			key := keys[fmt.Sprintf("rev%d", i+1)]
			expect(t, e.do("GET", "/api/v1/disputes/next", key, nil), 200, "")
			vote := fill(skillVote, `"runner" | "challenger"`, `"`+side+`"`,
				"<20 to 2000 characters, tied to specific comparisons>", "median_shift: my own rerun gives 0.0, within 0.005 of the published 0.0")
			expect(t, e.do("POST", "/api/v1/disputes/"+id+"/vote", key, vote), 200, "")
		}
		json.Unmarshal(e.do("GET", "/api/v1/claims/"+id, "", nil).body, &c)
		if c.State != dotlab.StateSettled || c.Outcome != dotlab.OutcomeReproduced {
			t.Fatalf("claim: %s %s", c.State, c.Outcome)
		}
		// On a manifest that sets a seed, "seed": 0 is not consistent.
		_, subKey := e.register("sub2")
		_, runnerKey := e.register("runner2")
		id2 := e.assigned(subKey, runnerKey, "seeded")
		b := sqlstoretest.RunBody(id2, "1.58", "1.17", dotlab.OutcomeReproduced)
		zero := int64(0)
		b.Environment.Seed = &zero
		r = e.do("POST", "/api/v1/runs", runnerKey, b)
		if expect(t, r, 422, "invalid"); !strings.Contains(r.err().Detail[0], "$.environment.seed: is 0 but the manifest sets 1908") {
			t.Fatalf("seed 0 on a seeded manifest: %q", r.err().Detail)
		}
		// The same literal body as a spec_issue run is consistent there: a
		// spec_issue is not compared with the manifest's seed or targets.
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, runOf(id2, "spec_issue", "mean_diff", "0.0")), 201, "")
	})
}
