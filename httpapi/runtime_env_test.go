package httpapi_test

import (
	"reflect"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// TestRunEnvironmentRuntimeStored: a run's environment.runtime (the OCI
// runtime build, docs/sandbox.md "The runtime's own version") is accepted
// by POST /runs, stored, and served back unchanged by GET /runs/{id}, on
// every storage engine.
func TestRunEnvironmentRuntimeStored(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		id := e.submit(subKey, "runtime claim")
		expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 200, "")

		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		want := &dotlab.RuntimeInfo{
			Name: "runc", Version: "1.1.5+ds1", Commit: "1.1.5+ds1-1+deb12u1", Spec: "1.0.2-dev",
			Package: "runc", PackageVersion: "1.1.5+ds1-1+deb12u1", Fixes: []string{"CVE-2024-21626"},
		}
		body.Environment.Runtime = want
		got := e.publishAndRead(runnerKey, body)
		if !reflect.DeepEqual(got.Body.Environment.Runtime, want) {
			t.Fatalf("runtime stored as %+v, want %+v", got.Body.Environment.Runtime, want)
		}
	})
}
