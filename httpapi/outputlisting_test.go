package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
)

// TestRunWithManyOutputsIsRefusedWhole: a run whose output_hashes list
// 1,000 files (an analysis that writes many files; the sandbox allows
// 100,000) makes a log entry over the 65,535 bytes one holds. Before, that
// was a 500 internal; now it is 413 too_large naming the limit and what to
// shorten, nothing is written, and the job can still publish.
func TestRunWithManyOutputsIsRefusedWhole(t *testing.T) {
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.MaxBodyBytes = 1 << 20 })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	id := e.assigned(subKey, runnerKey, "many outputs")
	body := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	for i := 0; i < 1000; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		body.OutputHashes[fmt.Sprintf("figures/panel_%04d.png", i)] = hex.EncodeToString(sum[:])
	}
	r := e.do("POST", "/api/v1/runs", runnerKey, body)
	expect(t, r, 413, "too_large")
	if d := strings.Join(r.err().Detail, " "); !strings.Contains(d, "65535") || !strings.Contains(d, "output_hashes") {
		t.Errorf("detail %q: want the limit and the field", d)
	}
	t.Logf("1,000 output hashes: %d %s", r.status, r.err().Error)
	small := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	expect(t, e.do("POST", "/api/v1/runs", runnerKey, small), 201, "")
}

// manyOutputs is n output hashes as an analysis writing n files makes them
// (results.json among them, with the fixture's hash).
func manyOutputs(n int) map[string]string {
	out := map[string]string{"results.json": "2222222222222222222222222222222222222222222222222222222222222222"}
	for i := len(out); i < n; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		out[fmt.Sprintf("figures/run_%03d/panel_%06d.png", i/1000, i)] = hex.EncodeToString(sum[:])
	}
	return out
}

// TestLargestRunPublishesWithEveryHash: a run listing 100,000 output files
// (the sandbox's output-count limit, sandbox.DefaultOutputFiles) was a 413
// inline; sent as an output listing beside the record (PUT
// /jobs/{id}/outputs, then the record pinning it) it publishes, every hash
// is served back byte for byte, and the record's log entry stays small and
// pins the listing. A record whose pin is not the uploaded listing (a
// listing changed after it was pinned) is refused, and a non-canonical
// listing too.
func TestLargestRunPublishesWithEveryHash(t *testing.T) {
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.MaxBodyBytes = 1 << 20 })
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	id := e.assigned(subKey, runnerKey, "100,000 outputs")
	hashes := manyOutputs(100_000)
	body := sqlstoretest.RunBody(id, "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	body.OutputHashes = hashes
	before := e.do("POST", "/api/v1/runs", runnerKey, body)
	expect(t, before, 413, "too_large")
	t.Logf("before: 100,000 output hashes inline: %d %s", before.status, before.err().Error)

	listing, pin, err := dotlab.EncodeOutputListing(hashes)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(listing, []byte(`{"name":"results.json"`), []byte(`{"name": "results.json"`), 1)
	expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", runnerKey, bad), 422, "invalid")
	start := time.Now()
	r := e.do("PUT", "/api/v1/jobs/"+id+"/outputs", runnerKey, listing)
	expect(t, r, 200, "")
	upload := time.Since(start)
	var got dotlab.OutputListing
	json.Unmarshal(r.body, &got)
	if got != pin {
		t.Fatalf("upload answered %+v, want %+v", got, pin)
	}
	body.OutputHashes = dotlab.InlineOutputs(hashes)
	wrong := *body
	wrong.OutputListing = &dotlab.OutputListing{SHA256: strings.Repeat("a", 64), Count: pin.Count, Bytes: pin.Bytes}
	r = e.do("POST", "/api/v1/runs", runnerKey, &wrong)
	expect(t, r, 422, "invalid")
	if d := strings.Join(r.err().Detail, " "); !strings.Contains(d, "$.output_listing") || !strings.Contains(d, pin.SHA256) {
		t.Errorf("wrong pin: %q", d)
	}
	body.OutputListing = &pin
	start = time.Now()
	run := e.publishAndRead(runnerKey, body)
	publish := time.Since(start)
	if run.Body.OutputListing == nil || *run.Body.OutputListing != pin {
		t.Fatalf("run record pins %+v, want %+v", run.Body.OutputListing, pin)
	}
	served := e.do("GET", "/api/v1/runs/"+run.ID+"/outputs", "", nil)
	expect(t, served, 200, "")
	back, err := dotlab.ParseOutputListing(served.body)
	if err != nil || !maps.Equal(back, hashes) {
		t.Fatalf("served listing: %d of %d hashes (%v)", len(back), len(hashes), err)
	}
	entry, err := tlogfmt.RunEntry(&run).Encode()
	if err != nil || !bytes.Contains(entry, []byte(`"output_listing":{"bytes":`)) || len(entry) > 4<<10 {
		t.Errorf("log entry (%d bytes, %v) does not pin the listing: %.300s", len(entry), err, entry)
	}
	// Pinned: the listing is fixed; the same bytes again answer the pin.
	expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", runnerKey, listing), 200, "")
	expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", runnerKey, listing[:len(listing)-1]), 409, "conflict")
	t.Logf("after: %d hashes, listing %d bytes (%.1f MiB), upload %v, publish %v; log entry %d bytes",
		pin.Count, pin.Bytes, float64(pin.Bytes)/(1<<20), upload.Round(time.Millisecond), publish.Round(time.Millisecond), len(entry))
}

// TestChallengeWithOutputListing: a challenge carries its own output
// listing the same way, on both engines; only an agent that may challenge
// uploads one (the submitter may not), and a challenge pinning a listing
// it did not upload is refused.
func TestChallengeWithOutputListing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		_, chKey := e.register("challenger")
		id, run := e.published(subKey, runnerKey, "challenge with many outputs")
		hashes := manyOutputs(2000)
		listing, pin, err := dotlab.EncodeOutputListing(hashes)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", subKey, listing), 403, "role_conflict")
		ch := dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody("", "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: id, Agrees: new(bool)}
		ch.Notes = "sd_diff: 1.17 (divide by n) vs the run's 1.2299, difference 0.0599"
		ch.OutputHashes = dotlab.InlineOutputs(hashes)
		ch.OutputListing = &pin
		expect(t, e.do("POST", "/api/v1/challenges", chKey, ch), 422, "invalid")
		expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", chKey, listing), 200, "")
		r := e.do("POST", "/api/v1/challenges", chKey, ch)
		expect(t, r, 201, "")
		var c dotlab.Challenge
		json.Unmarshal(r.body, &c)
		if c.OutputListing == nil || *c.OutputListing != pin {
			t.Fatalf("challenge pins %+v", c.OutputListing)
		}
		served := e.do("GET", "/api/v1/challenges/"+c.ID+"/outputs", "", nil)
		if !bytes.Equal(served.body, listing) {
			t.Fatalf("served %d bytes, uploaded %d", len(served.body), len(listing))
		}
		expect(t, e.do("GET", "/api/v1/runs/"+run.ID+"/outputs", "", nil), 404, "not_found")
		// The runner published without a listing: none can be added now.
		expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", runnerKey, listing), 409, "conflict")
	})
}

// TestUnpinnedOutputListingsAreBounded: an agent that may challenge many
// runs cannot park listings that never become records: past
// protocol.MaxUnpinnedOutputListings (4) unpinned ones the next upload is
// 409 conflict saying what to do; replacing one it holds still works.
func TestUnpinnedOutputListingsAreBounded(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	_, chKey := e.register("parker")
	listing, _, err := dotlab.EncodeOutputListing(manyOutputs(10))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 5 {
		id, _ := e.published(subKey, runnerKey, fmt.Sprintf("parked listing %d", i))
		ids = append(ids, id)
	}
	for _, id := range ids[:4] {
		expect(t, e.do("PUT", "/api/v1/jobs/"+id+"/outputs", chKey, listing), 200, "")
	}
	r := e.do("PUT", "/api/v1/jobs/"+ids[4]+"/outputs", chKey, listing)
	expect(t, r, 409, "conflict")
	if d := strings.Join(r.err().Detail, " "); !strings.Contains(d, "at most 4") {
		t.Errorf("detail %q", d)
	}
	expect(t, e.do("PUT", "/api/v1/jobs/"+ids[0]+"/outputs", chKey, listing), 200, "")
}
