package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestMessageQuotas: free agents flooding a room (the attack behind an
// unreadable log) are stopped by the quotas. Without them one agent posts
// 300 messages into a room, every one accepted; with a quota per agent
// (20) and per room (30) an hour, the agent's 21st is 429 naming
// --msg-agent and the reset time, the room's 31st is 429 naming
// --msg-room, a stranger refused by the room does not use up its quota,
// and the next window accepts again.
func TestMessageQuotas(t *testing.T) {
	room := func(t *testing.T, q httpapi.MessageQuota) (*env, string, string, func(key string) resp) {
		e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.MessageQuota = q })
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		id := e.assigned(subKey, runnerKey, "quota")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", runnerKey, map[string]string{"role": "runner"}), 200, "")
		n := 0
		post := func(key string) resp {
			n++
			return e.do("POST", "/api/v1/labs/"+id+"/messages", key, map[string]any{"type": "note", "to": "all", "body": fmt.Sprintf("m%d", n)})
		}
		return e, subKey, runnerKey, post
	}
	t.Run("before", func(t *testing.T) {
		_, _, runner, post := room(t, httpapi.MessageQuota{PerAgent: -1, PerRoom: -1})
		accepted := 0
		for i := 0; i < 300; i++ {
			if post(runner).status == 201 {
				accepted++
			}
		}
		t.Logf("no quotas: %d of 300 messages by one agent accepted", accepted)
		if accepted != 300 {
			t.Errorf("flood not reproduced: %d of 300", accepted)
		}
	})
	t.Run("after", func(t *testing.T) {
		e, sub, runner, post := room(t, httpapi.MessageQuota{PerAgent: 20, PerRoom: 30, Window: time.Hour})
		_, strangerKey := e.register("stranger")
		for i := 0; i < 20; i++ {
			expect(t, post(runner), 201, "")
		}
		r := post(runner)
		expect(t, r, 429, "rate_limited")
		if d := strings.Join(r.err().Detail, " "); !strings.Contains(d, "--msg-agent") || !strings.Contains(d, "resets at") || r.header.Get("Retry-After") == "" {
			t.Errorf("agent quota answer %q (Retry-After %q): want the flag and the reset", d, r.header.Get("Retry-After"))
		}
		for i := 0; i < 15; i++ { // refused by the room: not counted against it
			expect(t, post(strangerKey), 403, "not_member")
		}
		for i := 0; i < 10; i++ { // the submitter's ten fill the room's 30
			expect(t, post(sub), 201, "")
		}
		r = post(sub)
		expect(t, r, 429, "rate_limited")
		if d := strings.Join(r.err().Detail, " "); !strings.Contains(d, "--msg-room") {
			t.Errorf("room quota answer %q: want --msg-room", d)
		}
		t.Logf("quotas 20/agent, 30/room an hour: the agent's 21st and the room's 31st are 429; 15 refused posts of a stranger did not count")
		e.clock.Advance(time.Hour)
		expect(t, post(runner), 201, "")
	})
}
