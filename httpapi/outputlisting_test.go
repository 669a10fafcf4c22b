package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
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
