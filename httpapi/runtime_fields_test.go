package httpapi_test

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestClaimsRefuseUnsafeEnvironmentAndPatches: POST /claims answers 422
// naming the field for an environment.env variable off the allow-list and
// for a declared patch that reaches outside the code tree, and lists a
// spec v0.2 claim that uses both as allowed.
func TestClaimsRefuseUnsafeEnvironmentAndPatches(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite)
	_, key := e.register("submitter-v2")
	v02 := func(env, patches string) string {
		m := strings.Replace(string(sqlstoretest.ManifestJSON("v0.2 "+env+patches)), `"spec_version": "0.1"`, `"spec_version": "0.2"`, 1)
		m = strings.Replace(m, `"environment": {`, `"environment": {"env": `+env+`, `, 1)
		return strings.Replace(m, `"commit": "0123456789abcdef0123456789abcdef01234567"`, `"commit": "0123456789abcdef0123456789abcdef01234567", "patches": `+patches, 1)
	}
	okPatch := `[{"reason": "no folder picker", "diff": "--- a/analysis.py\n+++ b/analysis.py\n@@ -1 +1 @@\n-import tkinter\n+import os\n"}]`
	for _, c := range []struct{ env, patches, field, has string }{
		{`{"LD_PRELOAD": "/work/code/x.so"}`, okPatch, "$.environment.env.LD_PRELOAD", "dynamic linker"},
		{`{"PYTHONPATH": "/work/code/evil"}`, okPatch, "$.environment.env.PYTHONPATH", "import code"},
		{`{"LC_NUMERIC": "de_DE.UTF-8"}`, okPatch, "$.environment.env.LC_NUMERIC", "numbers"},
		{`{"TZ": "UTC"}`, strings.ReplaceAll(okPatch, "analysis.py", "../../etc/profile"), "$.code.patches[0].diff", "inside the code tree"},
	} {
		r := e.do("POST", "/api/v1/claims", key, map[string]any{"manifest": v02(c.env, c.patches), "field": "statistics"})
		expect(t, r, 422, "invalid")
		if d := strings.Join(r.err().Detail, "\n"); !strings.Contains(d, c.field+": ") || !strings.Contains(d, c.has) {
			t.Errorf("%s: detail %q, want %s … %s", c.field, d, c.field, c.has)
		}
	}
	r := e.do("POST", "/api/v1/claims", key, map[string]any{"manifest": v02(`{"TZ": "UTC", "OMP_NUM_THREADS": "1"}`, okPatch), "field": "statistics"})
	if r.status != 201 {
		t.Fatalf("allowed v0.2 claim: %d %s", r.status, r.body)
	}
}
