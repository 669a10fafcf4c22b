package httpapi_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/inputarchive"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestAdvArchiveQuotaRaced (adversarial review): the per-claim quota is
// checked against the blobs already committed, so two uploads of two
// different pinned inputs of one claim, in flight together, each see the
// whole quota free and both are kept: the claim then holds more than
// --archive-per-claim.
func TestAdvArchiveQuotaRaced(t *testing.T) {
	a, b := bytes.Repeat([]byte("a"), 1000), bytes.Repeat([]byte("b"), 1000)
	sa, sb := sha256.Sum256(a), sha256.Sum256(b)
	pa, pb := hex.EncodeToString(sa[:]), hex.EncodeToString(sb[:])
	dir := t.TempDir()
	bucket, err := inputarchive.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	limits := protocol.ArchiveLimits{MaxBlob: 1000, PerClaim: 1500} // room for one of the two
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.Archive, c.ArchiveLimits = inputarchive.New(bucket), limits })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	m := sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "quota race", DataSHA256: pa, Targets: `[{"name": "m", "value": 1, "tolerance": {"type": "absolute", "value": 0}}]`})
	m = strings.Replace(m, `"path": "sleep.csv"}]`, `"path": "sleep.csv"}, {"name": "extra", "url": "https://data.example.org/extra.csv", "sha256": "`+pb+`", "path": "extra.csv"}]`, 1)
	r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"field": "statistics", "manifest": m})
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var cv apiv1.ClaimView
	json.Unmarshal(r.body, &cv)
	if r := e.do("GET", "/api/v1/jobs/next", runnerKey, nil); r.status != 200 {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/jobs/"+cv.ID+"/accept", runnerKey, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	// Both uploads send all but their last byte, wait until both are in
	// flight (past the quota check), then finish.
	var wg sync.WaitGroup
	var started sync.WaitGroup
	release := make(chan struct{})
	statuses := make([]int, 2)
	for i, body := range [][]byte{a, b} {
		sum := []string{pa, pb}[i]
		pr, pw := io.Pipe()
		started.Add(1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			pw.Write(body[:len(body)-1])
			started.Done()
			<-release
			pw.Write(body[len(body)-1:])
			pw.Close()
		}()
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("PUT", e.srv.URL+"/api/v1/claims/"+cv.ID+"/inputs/"+sum, pr)
			req.ContentLength = int64(len(body))
			req.Header.Set("Authorization", "Bearer "+runnerKey)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			rb, _ := io.ReadAll(res.Body)
			res.Body.Close()
			statuses[i] = res.StatusCode
			t.Logf("upload %d: %d %s", i, res.StatusCode, rb)
		}()
	}
	started.Wait()
	time.Sleep(200 * time.Millisecond) // both handlers are reading their bodies
	close(release)
	wg.Wait()
	held := int64(0)
	for _, p := range []string{pa, pb} {
		if fi, err := os.Stat(filepath.Join(dir, "sha256", p)); err == nil {
			held += fi.Size()
		}
	}
	t.Logf("statuses %v held %d", statuses, held)
	if held > limits.PerClaim {
		t.Fatalf("statuses %v: the claim's archive holds %d bytes, over its quota of %d", statuses, held, limits.PerClaim)
	}
}

// TestAdvArchiveBodyInPieces (adversarial review): an upload whose body
// arrives in two pieces 100 ms apart is stored. The read deadline was
// set from the injected clock, which a test (or skewed) clock puts in
// the past: every body not in the first read failed as a 500.
func TestAdvArchiveBodyInPieces(t *testing.T) {
	data := bytes.Repeat([]byte("z"), 4000)
	sum := sha256.Sum256(data)
	pin := hex.EncodeToString(sum[:])
	bucket, err := inputarchive.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.Archive = inputarchive.New(bucket) })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"field": "statistics",
		"manifest": sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "pieces", DataSHA256: pin, Targets: `[{"name": "m", "value": 1, "tolerance": {"type": "absolute", "value": 0}}]`})})
	var cv apiv1.ClaimView
	json.Unmarshal(r.body, &cv)
	e.do("GET", "/api/v1/jobs/next", runnerKey, nil)
	if r := e.do("POST", "/api/v1/jobs/"+cv.ID+"/accept", runnerKey, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.Write(data[:100])
		time.Sleep(100 * time.Millisecond)
		pw.Write(data[100:])
		pw.Close()
	}()
	req, _ := http.NewRequest("PUT", e.srv.URL+"/api/v1/claims/"+cv.ID+"/inputs/"+pin, pr)
	req.ContentLength = int64(len(data))
	req.Header.Set("Authorization", "Bearer "+runnerKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("upload in pieces: %d %s", res.StatusCode, b)
	}
}

// TestAdvCanaryDetailControls (adversarial review): a canary report's
// detail, shown on the claim page beside other agents' reports, took
// terminal escapes (ESC) and bidirectional overrides (U+202E, which
// reorders the text around it on the page); agent names refuse both.
func TestAdvCanaryDetailControls(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	_, subKey := e.register("submitter")
	_, otherKey := e.register("other")
	r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"field": "statistics",
		"manifest": sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "canary text", Targets: `[{"name": "m", "value": 1, "tolerance": {"type": "absolute", "value": 0}}]`})})
	var cv apiv1.ClaimView
	json.Unmarshal(r.body, &cv)
	for _, detail := range []string{"HTTP 404 \u202e200 PTTH", "\x1b[2J\x1b[31mHTTP 200"} {
		expect(t, e.do("POST", "/api/v1/claims/"+cv.ID+"/canary", otherKey, map[string]any{"reports": []map[string]any{{"url": "https://data.example.org/sleep.csv", "status": "dead", "detail": detail}}}), 422, "invalid")
	}
	if r := e.do("POST", "/api/v1/claims/"+cv.ID+"/canary", otherKey, map[string]any{"reports": []map[string]any{{"url": "https://data.example.org/sleep.csv", "status": "dead", "detail": "HTTP 404"}}}); r.status != 200 {
		t.Fatalf("plain detail: %d %s", r.status, r.body)
	}
}

// TestAdvArchiveBodyCutShort (adversarial review): a body that ends
// before its Content-Length (the client cut it) was answered 500
// "internal … report it" and logged as a server error; it is the
// client's: 422, nothing kept.
func TestAdvArchiveBodyCutShort(t *testing.T) {
	data := []byte("cut short\n")
	sum := sha256.Sum256(data)
	pin := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	bucket, err := inputarchive.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.Archive = inputarchive.New(bucket) })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"field": "statistics",
		"manifest": sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "cut", DataSHA256: pin, Targets: `[{"name": "m", "value": 1, "tolerance": {"type": "absolute", "value": 0}}]`})})
	var cv apiv1.ClaimView
	json.Unmarshal(r.body, &cv)
	e.do("GET", "/api/v1/jobs/next", runnerKey, nil)
	if r := e.do("POST", "/api/v1/jobs/"+cv.ID+"/accept", runnerKey, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /api/v1/claims/%s/inputs/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n%s", cv.ID, pin, runnerKey, data)
	conn.(*net.TCPConn).CloseWrite()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 422 || !strings.Contains(string(b), "ended after 10 bytes of 100") {
		t.Fatalf("cut body: %d %s", res.StatusCode, b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(left) != 0 {
		t.Fatalf("a cut upload left %v", left)
	}
}
