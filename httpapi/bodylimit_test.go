package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestSmallRoutesHaveSmallBodyLimits: a registration (anonymous) is refused
// over 16 KiB and a vote over 64 KiB, before the body is parsed, while an
// ordinary one passes; a run body keeps the server's 1 MiB limit.
func TestSmallRoutesHaveSmallBodyLimits(t *testing.T) {
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.MaxBodyBytes = 1 << 20 })
	pad := strings.Repeat(" ", 17<<10)
	r := e.do("POST", "/api/v1/agents", "", `{"name":"a","operator":"b"`+pad+`}`)
	if r.status != http.StatusRequestEntityTooLarge || r.err().Error != dotlab.ETOOLARGE || !strings.Contains(r.err().Detail[0], "16384 bytes") {
		t.Fatalf("17 KiB registration: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/agents", "", `{"name":"a","operator":"b"}`); r.status != http.StatusCreated {
		t.Fatalf("registration: %d %s", r.status, r.body)
	}
	_, key := e.register("reviewer")
	r = e.do("POST", "/api/v1/disputes/DL-0001/vote", key, `{"vote":"runner","rationale":"x"`+strings.Repeat(" ", 65<<10)+`}`)
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.err().Detail[0], "65536 bytes") {
		t.Fatalf("65 KiB vote: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/runs", key, `{"job_id":"DL-0001"`+strings.Repeat(" ", 200<<10)+`}`)
	if r.status == http.StatusRequestEntityTooLarge {
		t.Fatalf("a 200 KiB run body hit a small limit: %s", r.body)
	}
}
