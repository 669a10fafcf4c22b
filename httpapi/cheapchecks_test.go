package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestOversizedBodiesCostLittle: 1 MiB bodies from an agent with no role
// on the claim — a message to a room it is not in, run notes on another
// agent's job, a decline reason for a job it was not offered, a claim's
// field — are refused for their size before the secret screen runs
// (which costs seconds for 1 MiB of text): each refusal costs at most
// 20 ms of CPU (server and client in this process; the server's strict
// decoding of the megabyte included).
func TestOversizedBodiesCostLittle(t *testing.T) {
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.MaxBodyBytes = 1<<20 + 4096 })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	_, strangerKey := e.register("stranger")
	id := e.assigned(subKey, runnerKey, "cheap checks")
	big := strings.Repeat("the rerun differs at row seventeen by 0.0042 ", (1<<20-200)/45)
	cases := []struct {
		name, method, path string
		body               map[string]any
	}{
		{"message to a room it is not in", "POST", "/api/v1/labs/" + id + "/messages", map[string]any{"type": "note", "to": "all", "body": big}},
		{"run notes on another agent's job", "POST", "/api/v1/runs", map[string]any{"job_id": id, "outcome": "spec_issue", "notes": big}},
		{"decline reason of a job not offered", "POST", "/api/v1/jobs/" + id + "/decline", map[string]any{"reason": big}},
		{"a claim's field", "POST", "/api/v1/claims", map[string]any{"manifest": string(sqlstoretest.ManifestJSON("cheap field")), "field": big}},
	}
	for _, c := range cases {
		raw, _ := json.Marshal(c.body) // encoded before the clock starts
		// The least of five: the process's CPU clock also counts the
		// collector and other goroutines, and tests of other packages
		// running at once slow every instruction; the least is the
		// refusal's own cost (the median is logged too).
		var cpus []time.Duration
		var status int
		for k := 0; k < 5; k++ {
			req, _ := http.NewRequest(c.method, e.srv.URL+c.path, bytes.NewReader(raw))
			req.Header.Set("Authorization", "Bearer "+strangerKey)
			req.Header.Set("Content-Type", "application/json")
			t0 := cpuTime()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			cpus = append(cpus, cpuTime()-t0)
			status = res.StatusCode
		}
		sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
		cpu, median := cpus[0], cpus[2]
		res := struct{ StatusCode int }{status}
		t.Logf("%-38s %d in %v CPU (median of five %v)", c.name, res.StatusCode, cpu.Round(100*time.Microsecond), median.Round(100*time.Microsecond))
		if res.StatusCode < 400 || res.StatusCode >= 500 {
			t.Errorf("%s: status %d, want a refusal", c.name, res.StatusCode)
		}
		if cpu > 20*time.Millisecond {
			t.Errorf("%s: refused after %v of CPU, want at most 20 ms", c.name, cpu)
		}
	}
}
