package httpapi_test

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestNumbersBeyondRange: a rerun value outside the accepted range (nonzero
// magnitude 1e-308 … 1.7976931348623157e308) is refused with 422 naming the
// field, and nothing is published; a manifest target outside it cannot be
// listed. The edges themselves are accepted.
func TestNumbersBeyondRange(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	_, subKey := e.register("submitter")
	_, runnerKey := e.register("runner")
	id := e.submit(subKey, "range claim")
	expect(t, e.do("GET", "/api/v1/jobs/next", runnerKey, nil), 200, "")
	expect(t, e.do("POST", "/api/v1/jobs/"+id+"/accept", runnerKey, nil), 200, "")

	for _, c := range []struct{ mean, sd, field string }{
		{"1e400", "1.17", "$.comparisons[0].rerun"},
		{"1.58", "-1e400", "$.comparisons[1].rerun"},
		{"1.58", "9.99e308", "$.comparisons[1].rerun"},
		{"1e-400", "1.17", "$.comparisons[0].rerun"},
		{"1" + strings.Repeat("0", 400), "1.17", "$.comparisons[0].rerun"},
		{"0e999999", "1.17", "$.comparisons[0].rerun"},
	} {
		// A bare JSON number in the body, exactly as a runner would send it.
		body := `{"job_id":"` + id + `","input_hashes":{"sleep":"` + sqlstoretest.DataSHA256 + `"},"output_hashes":{},` +
			`"environment":{"image_digest":"` + sqlstoretest.ImageDigest + `","seed":1908},` +
			`"comparisons":[{"name":"mean_diff","rerun":` + c.mean + `},{"name":"sd_diff","rerun":` + c.sd + `}],"outcome":"not_reproduced"}`
		r := e.do("POST", "/api/v1/runs", runnerKey, body)
		expect(t, r, 422, "invalid")
		d := strings.Join(r.err().Detail, "\n")
		t.Logf("%.20s/%.20s → %s", c.mean, c.sd, d)
		if !strings.Contains(d, c.field+":") || len(d) > 1000 {
			t.Errorf("%.20s/%.20s: detail %q does not name %s", c.mean, c.sd, d, c.field)
		}
	}
	// Nothing was published: the job is still open, and an in-range run at
	// the edge of the range publishes, its huge difference exact in the record.
	body := sqlstoretest.RunBody(id, "1.7976931348623157e308", "1e-308", dotlab.OutcomeNotReproduced)
	r := e.do("POST", "/api/v1/runs", runnerKey, body)
	expect(t, r, 201, "")
	if !strings.Contains(string(r.body), `"difference":179769313486231569999`) {
		t.Fatalf("exact difference missing from the record: %.600s", r.body)
	}

	// Listing: a target value outside the range is refused, by path.
	for _, c := range []struct{ old, new, field string }{
		{`"value": 1.58`, `"value": 5e-324`, "$.targets[0].value"},
		{`"value": 1.58`, `"value": 1e309`, "$.targets[0].value"},
		{`"value": 0.005}},
    {"name": "sd_diff"`, `"value": 1e-310}},
    {"name": "sd_diff"`, "$.targets[0].tolerance.value"},
	} {
		m := strings.Replace(string(sqlstoretest.ManifestJSON("range listing")), c.old, c.new, 1)
		if !strings.Contains(m, c.new) {
			t.Fatalf("fixture changed: %s not found", c.old)
		}
		r := e.do("POST", "/api/v1/claims", subKey, map[string]any{"manifest": m, "field": "statistics"})
		expect(t, r, 422, "invalid")
		d := strings.Join(r.err().Detail, "\n")
		t.Logf("%s → %s", c.new, d)
		if !strings.Contains(d, c.field+":") || !strings.Contains(d, "out of range") {
			t.Errorf("%s: detail %q does not name %s", c.new, d, c.field)
		}
	}
}
