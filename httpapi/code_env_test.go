package httpapi_test

import (
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// TestRunEnvironmentCodeStored: a run's environment.code_commit (the code
// it executed, beside the image digest) is accepted by POST
// /runs, stored and served back by GET /runs/{id} on every storage engine;
// a commit other than the manifest's is refused.
func TestRunEnvironmentCodeStored(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567" // sqlstoretest.ManifestJSON's
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		id := e.submit(subKey, "code claim")
		expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
		expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 200, "")

		body := sqlstoretest.RunBody(id, "1.58", "1.17", dotlab.OutcomeReproduced)
		body.Environment.CodeCommit = "ffffffffffffffffffffffffffffffffffffffff"
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 422, "invalid")
		body.Environment.CodeCommit = ""
		body.Environment.CodeArchiveSHA256 = "2222222222222222222222222222222222222222222222222222222222222222"
		expect(t, e.do("POST", "/api/v1/runs", runnerKey, body), 422, "invalid")

		body.Environment.CodeArchiveSHA256 = ""
		body.Environment.CodeCommit = commit
		got := e.publishAndRead(runnerKey, body)
		if got.Body.Environment.CodeCommit != commit || got.Body.Environment.CodeArchiveSHA256 != "" {
			t.Fatalf("environment stored as %+v", got.Body.Environment)
		}
	})
}
