package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRequestsAndMaxInFlight: the request log is read line by line (other
// lines, haproxy's own messages, skipped) and the overlap of requests is
// counted from their accept times and durations.
func TestRequestsAndMaxInFlight(t *testing.T) {
	h := &HAProxy{Dir: t.TempDir()}
	log := `[WARNING]  (1) : Server dotlab/s1 is UP
dotlab-http 200 GET /api/v1/jobs/next s1 10 ---- 1796138428.100
dotlab-http 204 GET /api/v1/jobs/next s2 10 ---- 1796138428.105
dotlab-http 502 POST /api/v1/runs s1 3 SH-- 1796138428.106
dotlab-http 200 GET /api/v1/jobs/next s1 5 ---- 1796138428.111
dotlab-http 503 GET /api/v1/jobs/next <NOSRV> 0 SC-- 1796138428.200
`
	if err := os.WriteFile(filepath.Join(h.Dir, "haproxy.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs, err := h.Requests()
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 5 || reqs[2].Status != 502 || reqs[2].Termination != "SH--" || reqs[4].Server != "<NOSRV>" ||
		reqs[0].Total != 10*time.Millisecond || !reqs[1].Accepted.Equal(time.UnixMilli(1796138428105)) {
		t.Fatalf("%+v", reqs)
	}
	// 100–111 and 105–116 overlap, 111–117 overlaps the second; the
	// 503 at 200 is alone.
	if n := MaxInFlight(reqs, "GET", "/api/v1/jobs/next"); n != 2 {
		t.Fatalf("MaxInFlight = %d, want 2", n)
	}
	if n := MaxInFlight(reqs, "POST", "/api/v1/"); n != 1 {
		t.Fatalf("MaxInFlight POST = %d, want 1", n)
	}
}
