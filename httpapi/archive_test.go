package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/inputarchive"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestInputArchiveChecks (docs/protocol.md "Input archive"): PUT
// /claims/{id}/inputs/{sha256} is refused, before a byte is kept, to an
// agent without a rerunning role (403), for a hash the manifest does not
// pin (404), over the blob limit (413), and for bytes that hash to
// something else (422, nothing on disk); the claim's runner stores the
// pinned bytes once (201, then 200), reads them back, and other agents
// cannot; the per-claim quota counts what the claim's inputs hold.
func TestInputArchiveChecks(t *testing.T) {
	data := []byte("patient,drug1,drug2\n1,0.7,1.9\n")
	sum := sha256.Sum256(data)
	pin := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	b, err := inputarchive.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	limits := protocol.ArchiveLimits{MaxBlob: int64(len(data)), PerClaim: int64(len(data))}
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.Archive, c.ArchiveLimits = inputarchive.New(b), limits })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	_, otherKey := e.register("other")
	r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"field": "statistics",
		"manifest": sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "archive", DataSHA256: pin, Targets: `[{"name": "m", "value": 1, "tolerance": {"type": "absolute", "value": 0}}]`})})
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var cv apiv1.ClaimView
	json.Unmarshal(r.body, &cv)
	id := cv.ID
	path := "/api/v1/claims/" + id + "/inputs/" + pin
	// Before the runner holds its role, nobody may put or read.
	expect(t, e.do("PUT", path, subKey, data), 403, "role_conflict")
	if r := e.do("GET", "/api/v1/jobs/next", runnerKey, nil); r.status != 200 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	other := sha256.Sum256([]byte("other"))
	expect(t, e.do("PUT", "/api/v1/claims/"+id+"/inputs/"+hex.EncodeToString(other[:]), runnerKey, []byte("other")), 404, "not_found")
	expect(t, e.do("PUT", path, runnerKey, append(bytes.Clone(data), 'x')), 413, "too_large")
	flipped := bytes.Clone(data)
	flipped[0] ^= 1
	expect(t, e.do("PUT", path, runnerKey, flipped), 422, "invalid")
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(left) != 0 {
		t.Fatalf("refused uploads left %v", left)
	}
	expect(t, e.do("GET", path, runnerKey, nil), 404, "not_found")
	if r := e.do("PUT", path, runnerKey, data); r.status != 201 || !strings.Contains(string(r.body), `"stored":true`) {
		t.Fatalf("first upload: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", path, runnerKey, data); r.status != 200 || !strings.Contains(string(r.body), `"stored":false`) {
		t.Fatalf("second upload: %d %s", r.status, r.body)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "sha256", pin)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("on disk: %q %v", got, err)
	}
	if r := e.do("GET", path, runnerKey, nil); r.status != http.StatusOK || !bytes.Equal(r.body, data) {
		t.Fatalf("read back: %d %q", r.status, r.body)
	}
	expect(t, e.do("GET", path, otherKey, nil), 403, "role_conflict")
	expect(t, e.do("GET", path, "", nil), 401, "unauthorized")

	// The canary: any agent, URLs the manifest pins only, once a minute.
	dead := map[string]any{"reports": []map[string]any{{"url": "https://data.example.org/sleep.csv", "status": "dead", "detail": "HTTP 404"}}}
	expect(t, e.do("POST", "/api/v1/claims/"+id+"/canary", otherKey, map[string]any{"reports": []map[string]any{{"url": "https://elsewhere.example.org/x", "status": "dead"}}}), 422, "invalid")
	expect(t, e.do("POST", "/api/v1/claims/"+id+"/canary", otherKey, map[string]any{"reports": []map[string]any{{"url": "https://data.example.org/sleep.csv", "status": "gone"}}}), 422, "invalid")
	if r := e.do("POST", "/api/v1/claims/"+id+"/canary", otherKey, dead); r.status != 200 || !strings.Contains(string(r.body), `"status":"dead"`) {
		t.Fatalf("canary: %d %s", r.status, r.body)
	}
	expect(t, e.do("POST", "/api/v1/claims/"+id+"/canary", otherKey, dead), 429, "rate_limited")
	e.clock.Advance(protocol.CanaryInterval)
	if r := e.do("POST", "/api/v1/claims/"+id+"/canary", otherKey, dead); r.status != 200 {
		t.Fatalf("canary after the interval: %d %s", r.status, r.body)
	}
}

// TestInputArchiveForChallengers: an agent that may challenge the
// published run reruns it before it holds the challenger role, so it may
// put and read the claim's archived inputs in the window; the submitter
// may not.
func TestInputArchiveForChallengers(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "examples", "claims", "student-1908", "sleep.csv"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := inputarchive.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.Archive = inputarchive.New(b) })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	_, challengerKey := e.register("challenger")
	id, _ := e.published(subKey, runnerKey, "archive for challengers")
	path := "/api/v1/claims/" + id + "/inputs/" + sqlstoretest.DataSHA256
	if r := e.do("PUT", path, challengerKey, data); r.status != 201 {
		t.Fatalf("would-be challenger upload: %d %s", r.status, r.body)
	}
	if r := e.do("GET", path, challengerKey, nil); r.status != 200 || !bytes.Equal(r.body, data) {
		t.Fatalf("would-be challenger read: %d", r.status)
	}
	expect(t, e.do("GET", path, subKey, nil), 403, "role_conflict")
}
