package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

// TestAdvRevealPhaseLeaksNothing (adversarial review): on a sealed
// server, three reviewers commit by POST /commit; in the reveal phase the
// first two reveal. Until the third reveals, neither revealed rationale
// nor the word of any vote shows on any public surface (API, pages,
// feeds, citations, activity, summary, the log info), nor to the third
// reviewer; a reveal with a wrong salt, a second reveal and a reveal by
// an agent with no seat are refused without echoing another's vote.
func TestAdvRevealPhaseLeaksNothing(t *testing.T) {
	base, id, _, keys, stranger := advServer(t)
	api := base + "/api/v1"
	rationales := []string{"sd_diff: reviewer zero checks 1.17 against the recomputed 1.1702", "sd_diff: reviewer one finds 1.2299 from dividing by n-1"}
	sides := []string{"challenger", "runner", "challenger"}
	ids := make([]string, 3)
	salt := func(i int) string { return strings.Repeat(string(rune('a'+i)), 64) }
	third := "sd_diff: reviewer two sides with 1.17 after rerunning"
	for i, key := range keys {
		doAt(t, api, "GET", "/disputes/next", key, "").want(t, 200, "")
		var me struct {
			ID string `json:"agent_id"`
		}
		doAt(t, api, "GET", "/agents/me", key, "").want(t, 200, "").decode(t, &me)
		ids[i] = me.ID
		r := third
		if i < 2 {
			r = rationales[i]
		}
		c := dotlab.VoteCommitment(id, me.ID, sides[i], r, salt(i))
		doAt(t, api, "POST", "/disputes/"+id+"/commit", key, string(advJSON(map[string]string{"commitment": c}))).want(t, 200, "")
	}
	reveal := func(i int, s string) string {
		r := third
		if i < 2 {
			r = rationales[i]
		}
		return string(advJSON(map[string]string{"vote": sides[i], "rationale": r, "salt": s}))
	}
	// A wrong salt, then the right one, for the first two.
	for i := 0; i < 2; i++ {
		w := doAt(t, api, "POST", "/disputes/"+id+"/reveal", keys[i], reveal(i, salt(5))).want(t, 422, "invalid")
		if strings.Contains(string(w.body), "reviewer") && strings.Contains(string(w.body), rationales[1-i]) {
			t.Fatalf("a wrong salt's refusal shows the other's rationale: %s", w.body)
		}
		doAt(t, api, "POST", "/disputes/"+id+"/reveal", keys[i], reveal(i, salt(i))).want(t, 200, "")
		doAt(t, api, "POST", "/disputes/"+id+"/reveal", keys[i], reveal(i, salt(i))).want(t, 409, "conflict")
	}
	doAt(t, api, "POST", "/disputes/"+id+"/reveal", stranger, reveal(0, salt(0))).want(t, 409, "not_offered")
	var all strings.Builder
	for _, p := range []string{"/api/v1/disputes/" + id, "/api/v1/claims/" + id, "/api/v1/claims", "/api/v1/summary", "/api/v1/log",
		"/claims/" + id, "/claims", "/", "/labs/" + id, "/api/v1/labs/" + id + "/messages", "/feed.atom",
		"/claims/" + id + "/citation.json", "/claims/" + id + "/citation.bib", "/claims/" + id + "/badge.svg"} {
		all.Write(doAt(t, base, "GET", p, "", "").body)
	}
	for _, a := range ids {
		all.Write(doAt(t, base, "GET", "/agents/"+a, "", "").body)
		all.Write(doAt(t, api, "GET", "/agents/"+a, "", "").body)
		all.Write(doAt(t, api, "GET", "/agents/"+a+"/activity", "", "").body)
	}
	all.Write(doAt(t, api, "GET", "/disputes/next", keys[2], "").body)
	all.Write(doAt(t, api, "GET", "/disputes/"+id, keys[2], "").body)
	for _, r := range rationales {
		if strings.Contains(all.String(), r[len("sd_diff: "):]) {
			t.Fatalf("a revealed rationale is public before the decision: %q", r)
		}
	}
	var d dotlab.Dispute
	doAt(t, api, "GET", "/disputes/"+id, "", "").want(t, 200, "").decode(t, &d)
	if len(d.Votes) != 0 || d.Sealed == nil || d.Sealed.Phase != dotlab.PhaseReveal {
		b, _ := json.Marshal(d.Sealed)
		t.Fatalf("reveal phase: votes %v, sealed %s", d.Votes, b)
	}
	doAt(t, api, "POST", "/disputes/"+id+"/reveal", keys[2], reveal(2, salt(2))).want(t, 200, "")
	doAt(t, api, "GET", "/disputes/"+id, "", "").want(t, 200, "").decode(t, &d)
	if len(d.Votes) != 3 {
		t.Fatalf("decided: %d votes shown, want 3", len(d.Votes))
	}
}
