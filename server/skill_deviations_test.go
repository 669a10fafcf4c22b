package server_test

// TestSkillConformanceDeviations holds the six deviations from the skill
// text that issue 26 found (an agent following agent-skill-dotlab.txt word
// for word, curl only), one subtest each, against a real server on each
// engine, speaking raw HTTP and JSON with the skill's own bodies as
// TestSkillConformance does.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

func TestSkillConformanceDeviations(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			clock := sqlstoretest.NewClock()
			w := &walk{base: startServer(t, sqlstoretest.URL(t, engine), clock, httpapi.RateLimit{}, httpapi.RateLimit{}), clock: clock,
				agents: map[string]*skillAgent{}, claims: map[string]string{}, texts: map[string]string{}, runs: map[string]string{}, chs: map[string]string{}}
			for _, name := range []string{"submitter", "runner", "late", "stranger", "challenger"} {
				w.register(t, name)
			}
			for _, s := range []struct {
				name string
				f    func(*testing.T, *walk)
			}{
				{"1 a 422 names every problem", deviationAllProblems},
				{"2 publish before accepting and after the deadline", deviationPublishTexts},
				{"5 the POST /runs answer says how a run counts as well logged", deviationWellLogged},
				{"4 the challenge window list is one list, marked per caller", deviationChallengeMarks},
				{"3 a vote by a reviewer not drawn", deviationVoteNotDrawn},
				{"6 joins and the Bearer scheme", deviationJoinAndBearer},
				{"1 the manifest's problems in one answer", deviationManifestProblems},
				{"2 the abandoned job", deviationAbandoned},
			} {
				if !t.Run(s.name, func(t *testing.T) { s.f(t, w) }) {
					t.FailNow()
				}
			}
		})
	}
}

// saysAll asserts that the 422's detail has one line per part (in any
// order), each line naming its field: parts are the fields' paths.
func saysAll(t *testing.T, r reply, paths ...string) {
	t.Helper()
	r.want(t, 422, dotlab.EINVALID)
	lines := r.errBody(t).Detail
	for _, p := range paths {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, p+":") || strings.HasPrefix(l, "manifest: "+p+":") {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s %s: no detail names %s: %q", r.method, r.path, p, lines)
		}
	}
}

// deviationAllProblems, item 1: "a 422 names only the first problem found:
// one run body with three faults took three requests (no outcome, then the
// seed, then the mismatch)". Every write body's problems that need no
// database come in one answer, each naming its field; the caller need not
// hold the job for them (they are checked before the database is asked).
func deviationAllProblems(t *testing.T, w *walk) {
	key := w.agents["stranger"].key
	// A run: no outcome, a seed that is not a number, an input hash that is
	// not one, a rerun value that is not a number.
	run := runBody(t, runFill{job: "DL-0001", comps: []comp{{"mean_diff", `"about 1.6"`}}, outcome: "", seedValue: `"seven"`, inputSHA: "not-a-hash"})
	saysAll(t, w.do(t, "POST", "/runs", key, run), "$.outcome", "$.environment.seed", `$.input_hashes["sleep"]`, "$.comparisons[0].rerun")
	// Without a job_id too, and an unknown field.
	noJob := strings.Replace(run, `"job_id": "DL-0001",`, `"jobid": "DL-0001",`, 1)
	saysAll(t, w.do(t, "POST", "/runs", key, noJob), "$.job_id", "$.jobid", "$.outcome", "$.environment.seed")
	// A challenge: the run body's problems, no claim_id, agrees not a boolean.
	ch := runBody(t, runFill{job: "", comps: twoComps, outcome: "", extra: []string{`"agrees": "yes"`}})
	ch = strings.Replace(ch, `"job_id": "",`, "", 1)
	saysAll(t, w.do(t, "POST", "/challenges", key, ch), "$.outcome", "$.claim_id", "$.agrees")
	// A vote: no side, a short rationale, an unknown field.
	vote := strings.Replace(voteBody(t, "both", "too short"), "{", `{ "weight": 2,`, 1)
	saysAll(t, w.do(t, "POST", "/disputes/DL-0001/vote", key, vote), "$.vote", "$.rationale", "$.weight")
	// A message: a bad type, no recipient, an empty body.
	saysAll(t, w.do(t, "POST", "/labs/DL-0001/messages", key, messageBody(t, "rumour", "", "", "x")), "$.type", "$.to", "$.body")
	// A registration: no name, no operator, capabilities not a list.
	reg := fillOnce(t, fillOnce(t, skillRegister, "<handle>", ""), "<who runs you>", "")
	reg = fillOnce(t, reg, `["python", "r", "gpu"]`, `"python"`)
	saysAll(t, w.do(t, "POST", "/agents", "", reg), "$.name", "$.operator", "$.capabilities")
	// A claim: no field, and the manifest's own problems, in one answer.
	bad := strings.Replace(manifestText("two faults", "1908", twoTargets), `"title": "two faults"`, `"title": ""`, 1)
	r := w.do(t, "POST", "/claims", w.agents["submitter"].key, claimBody(t, bad, ""))
	saysAll(t, r, "$.field")
	if !strings.Contains(r.detail(t), "manifest: ") {
		t.Fatalf("the manifest's problem is not named with the field's: %s", r.body)
	}
}

// deviationManifestProblems, item 1 against the manifest: a body whose
// problems need the claim (the seed the manifest sets, an input hash that
// differs, a target it does not have) gets all of them in one answer too,
// and so does one that also has problems of its own, when the caller is
// the claim's runner.
func deviationManifestProblems(t *testing.T, w *walk) {
	id := w.list(t, "M", "submitter", manifestText("three faults against the manifest", "1908", twoTargets))
	w.assign(t, "runner", "M")
	body := runBody(t, runFill{job: id, comps: []comp{{"mean_diff", "1.58"}, {"sd_dif", "1.17"}}, outcome: "reproduced", seedValue: "7", inputSHA: otherSHA})
	saysAll(t, w.do(t, "POST", "/runs", w.agents["runner"].key, body), "$.environment.seed", `$.input_hashes["sleep"]`, "$.comparisons")
	// The issue's own body: no outcome, the wrong seed, and (what the
	// second retry met) the outcome the comparisons give, in one answer.
	noOutcome := runBody(t, runFill{job: id, comps: twoComps, outcome: "", seedValue: "7", inputSHA: otherSHA})
	r := w.do(t, "POST", "/runs", w.agents["runner"].key, noOutcome)
	saysAll(t, r, "$.outcome", "$.environment.seed", `$.input_hashes["sleep"]`)
	r.says(t, "must be one of", "your comparisons give reproduced", "1908")
	// To an agent that may not publish on the claim, only what the body
	// shows by itself: nothing of the claim's manifest.
	other := w.do(t, "POST", "/runs", w.agents["stranger"].key, noOutcome)
	saysAll(t, other, "$.outcome")
	if d := other.detail(t); strings.Contains(d, "seed") || strings.Contains(d, "1908") || strings.Contains(d, "input_hashes") {
		t.Fatalf("a caller that may not publish learns of the manifest: %s", other.body)
	}
	w.publish(t, "runner", "M", runBody(t, runFill{job: id, comps: twoComps, outcome: "spec_issue", notes: "the test's manifest is a stub"}))
}

// deviationPublishTexts, item 2, before accepting: "publishing before
// accepting … sends the agent to /jobs/next, which returns the same
// offer (say "accept first")". The hint, followed, works; then the run
// publishes.
func deviationPublishTexts(t *testing.T, w *walk) {
	id := w.list(t, "P", "submitter", manifestText("publish texts", "1908", twoTargets))
	j := w.next(t, "runner")
	if j == nil || j.ClaimID != id {
		t.Fatalf("drew %+v, want %s", j, id)
	}
	body := runBody(t, runFill{job: id, comps: twoComps, outcome: "reproduced", seedValue: "1908"})
	r := w.do(t, "POST", "/runs", w.agents["runner"].key, body).want(t, 409, dotlab.ENOTOFFERED).
		says(t, "accept it first", "POST /api/v1/jobs/"+id+"/accept")
	if strings.Contains(r.detail(t), "/jobs/next") {
		t.Fatalf("before accepting, the hint still sends the agent to the draw: %s", r.body)
	}
	w.follow(t, "runner", r)
	w.publish(t, "runner", "P", body)
}

// deviationWellLogged, item 5: "standing counts runs_well_logged only for
// logs uploaded with PUT /jobs/{id}/logs, which the skill never names: the
// answer to POST /runs should say how a run counts as well logged". The
// answer is the run as GET /runs/{id} has it, plus well_logged.
func deviationWellLogged(t *testing.T, w *walk) {
	id := w.list(t, "W", "submitter", manifestText("well logged", "1908", twoTargets))
	w.assign(t, "late", "W")
	body := runBody(t, runFill{job: id, comps: twoComps, outcome: "spec_issue", notes: "a stub", extra: []string{`"logs_sha256": "` + dataSHA + `"`}})
	pr := w.do(t, "POST", "/runs", w.agents["late"].key, body).want(t, 201, "")
	var answer, got map[string]json.RawMessage
	pr.decode(t, &answer)
	var text string
	if err := json.Unmarshal(answer["well_logged"], &text); err != nil || !strings.Contains(text, "PUT /api/v1/jobs/"+id+"/logs") || !strings.Contains(text, "runs_well_logged") {
		t.Fatalf("the POST /runs answer does not say how the run counts as well logged: %s", pr.body)
	}
	var run dotlab.Run
	pr.decode(t, &run)
	r := w.do(t, "GET", "/runs/"+run.ID, "", "").want(t, 200, "")
	r.decode(t, &got)
	if got["well_logged"] != nil {
		t.Fatalf("GET /runs/{id} changed: %s", r.body)
	}
	for k := range got {
		if string(answer[k]) != string(got[k]) {
			t.Fatalf("the POST /runs answer's %q differs from the run's: %s against %s", k, answer[k], got[k])
		}
	}
	if len(answer) != len(got)+1 {
		t.Fatalf("the POST /runs answer is not the run plus well_logged: %s", pr.body)
	}
}

// deviationChallengeMarks, item 4: "GET /runs?status=challenge_window
// lists, for the submitter, only runs it may not challenge: keep the list
// the same for everyone and mark, for a caller with a key, each run it may
// not challenge and why".
func deviationChallengeMarks(t *testing.T, w *walk) {
	listed := func(key string) (ids []string, marks map[string]dotlab.RunListing) {
		r := w.do(t, "GET", "/runs?status=challenge_window", key, "").want(t, 200, "")
		marks = checkListing(t, r)
		var page apiv1.RunPage
		r.decode(t, &page)
		for _, l := range page.Runs {
			ids = append(ids, l.ID)
		}
		return ids, marks
	}
	anon, anonMarks := listed("")
	if len(anon) != 1 || anon[0] != w.runs["P"] {
		t.Fatalf("the window lists %v, want [%s]", anon, w.runs["P"])
	}
	if l := anonMarks[w.claims["P"]]; l.YouMayChallenge != nil || l.Reason != "" {
		t.Fatalf("an anonymous listing is marked: %+v", l)
	}
	for who, want := range map[string]string{"submitter": "submitter", "runner": "runner", "stranger": ""} {
		ids, marks := listed(w.agents[who].key)
		if strings.Join(ids, ",") != strings.Join(anon, ",") {
			t.Fatalf("%s sees %v, anonymous %v: one list for everyone", who, ids, anon)
		}
		l := marks[w.claims["P"]]
		if l.YouMayChallenge == nil || *l.YouMayChallenge != (want == "") || !strings.Contains(l.Reason, want) || (want == "") != (l.Reason == "") {
			t.Fatalf("%s's mark: %+v, want a %q reason", who, l, want)
		}
	}
	// A challenge with problems of its own and against the manifest: all
	// in one answer, to an agent that may challenge.
	bad := challengeBody(t, w.claims["P"], true, runFill{comps: twoComps, outcome: "", seedValue: "7"})
	r := w.do(t, "POST", "/challenges", w.agents["challenger"].key, bad)
	saysAll(t, r, "$.outcome", "$.environment.seed")
	r.says(t, "your comparisons give reproduced", "1908")
	// The mark is true to the API: the stranger may, the submitter may not.
	ch := challengeBody(t, w.claims["P"], true, runFill{comps: twoComps, outcome: "reproduced", seedValue: "1908"})
	w.do(t, "POST", "/challenges", w.agents["submitter"].key, ch).want(t, 403, dotlab.EROLECONFLICT)
	w.do(t, "POST", "/challenges", w.agents["challenger"].key, ch).want(t, 201, "")
	if _, marks := listed(w.agents["challenger"].key); !strings.Contains(marks[w.claims["P"]].Reason, "already challenged") {
		t.Fatalf("after its challenge: %+v", marks[w.claims["P"]])
	}
}

// deviationVoteNotDrawn, item 3: "a vote by a reviewer who was not drawn
// is 403 role_conflict, though it holds no role (409 not_offered by the
// skill's own categories)". (The walk's reviewer section asserts it on a
// disputed claim too.)
func deviationVoteNotDrawn(t *testing.T, w *walk) {
	r := w.do(t, "POST", "/disputes/"+w.claims["P"]+"/vote", w.agents["stranger"].key,
		voteBody(t, "runner", "mean_diff: 1.58 matches the published 1.58")).want(t, 409, dotlab.ENOTOFFERED)
	r.says(t, "not assigned to you", "GET /api/v1/disputes/next")
}

// deviationJoinAndBearer, item 6: "the submitter joining as collaborator
// gets 200 with role submitter (refuse, or say so in the answer); the 403
// join detail repeats itself; the Bearer scheme is case-sensitive (RFC
// 7235 says it is not)". DotLab says so in the answer: the skill lets the
// submitter post in its room, and joining keeps its one role.
func deviationJoinAndBearer(t *testing.T, w *walk) {
	id := w.claims["P"]
	var m dotlab.LabMember
	w.do(t, "POST", "/labs/"+id+"/join", w.agents["submitter"].key, skillJoinCollaborator).want(t, 200, "").decode(t, &m)
	if m.Role != dotlab.RoleSubmitter || !strings.Contains(m.Note, "submitter") || !strings.Contains(m.Note, "not as a collaborator") {
		t.Fatalf("the submitter's join answer: %+v", m)
	}
	r := w.do(t, "POST", "/labs/"+id+"/join", w.agents["challenger"].key, skillJoinCollaborator).want(t, 403, dotlab.EROLECONFLICT)
	d := r.detail(t)
	for _, part := range []string{"you are the challenger of " + id, "one role per claim"} {
		if n := strings.Count(d, part); n != 1 {
			t.Fatalf("the 403 join detail says %q %d times: %q", part, n, d)
		}
	}
	w.follow(t, "challenger", r)
	for _, scheme := range []string{"bearer", "BEARER", "beArEr"} {
		req, err := http.NewRequest("GET", w.base+"/api/v1/agents/me", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", scheme+" "+w.agents["stranger"].key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("Authorization: %s <key>: %d, want 200 (RFC 7235 §2.1: the scheme is case-insensitive)", scheme, res.StatusCode)
		}
	}
	w.do(t, "GET", "/agents/me", "", "").want(t, 401, dotlab.EUNAUTHORIZED)
}

// deviationAbandoned, item 2, after the deadline: "publishing after the
// deadline answers 409 not_offered "not assigned to you" to the runner that
// was assigned (the job was abandoned: say so)".
func deviationAbandoned(t *testing.T, w *walk) {
	id := w.list(t, "L", "submitter", manifestText("a job left too long", "1908", twoTargets))
	w.assign(t, "stranger", "L")
	w.clock.Advance(24*time.Hour + time.Second)
	waitFor(t, "abandon the late job", func() bool { return w.activity(t, "stranger", "job_abandoned", id) })
	late := runBody(t, runFill{job: id, comps: twoComps, outcome: "reproduced", seedValue: "1908"})
	r := w.do(t, "POST", "/runs", w.agents["stranger"].key, late).want(t, 409, dotlab.ENOTOFFERED).
		says(t, "abandoned", "publish deadline", "GET /api/v1/jobs/next")
	if strings.Contains(r.detail(t), "not assigned to you") {
		t.Fatalf("the abandoned runner is told the job was never its: %s", r.body)
	}
	// Someone who never held it still hears "not assigned to you".
	w.do(t, "POST", "/runs", w.agents["late"].key, late).want(t, 409, dotlab.ENOTOFFERED).says(t, "not assigned to you")
}
