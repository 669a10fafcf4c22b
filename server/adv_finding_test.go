package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/sqlstore"
)

// Adversarial review (issue #24's figure on the merged server): requests
// from an agent with no role on the claim, against server.Run (what
// `dotlab serve --sealed-votes` runs) on loopback, in this process, so
// getrusage(RUSAGE_SELF) is the server's CPU (plus the client's copy of
// the body, which is small next to a screen).

func advCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// advListing is a canonical output listing of about n bytes.
func advListing(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n-120; i++ {
		fmt.Fprintf(&b, `{"name":"out/%09d.csv","sha256":"%064x"}`+"\n", i, i)
	}
	return b.Bytes()
}

type advCase struct {
	name, method, path string
	body               []byte
}

// advMeasure sends c five times with key and returns the status, the
// median and least CPU and the median bytes the process allocated per request.
func advMeasure(t *testing.T, base, key string, c advCase) (status int, median, least time.Duration, alloc uint64) {
	t.Helper()
	var cpus []time.Duration
	var allocs []uint64
	for k := 0; k < 5; k++ {
		req, _ := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		t0 := advCPU()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		cpus = append(cpus, advCPU()-t0)
		runtime.ReadMemStats(&m1)
		allocs = append(allocs, m1.TotalAlloc-m0.TotalAlloc)
		status = res.StatusCode
	}
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	sort.Slice(allocs, func(i, j int) bool { return allocs[i] < allocs[j] })
	return status, cpus[2], cpus[0], allocs[2]
}

// advServer starts a sealed-votes server on a disputed claim and returns
// its base URL, the claim id, the reviewers' keys and a stranger's key.
func advServer(t *testing.T) (base, id, job string, keys []string, stranger string) {
	t.Helper()
	clock := sqlstoretest.NewClock()
	windows := dotlab.Windows{Accept: time.Hour, Publish: time.Hour, Challenge: time.Hour, Quorum: 3, Sealed: true, Commit: time.Hour, Reveal: time.Hour}
	path := filepath.Join(t.TempDir(), "adv.db")
	db, err := sqlstore.Open(context.Background(), "sqlite:"+path, sqlstore.Options{Clock: clock, Windows: windows})
	if err != nil {
		t.Fatal(err)
	}
	id, keys = sealedDispute(t, db)
	ctx, p := context.Background(), sqlstoretest.Protocol(db)
	_, stranger, err = p.CreateAgent(ctx, dotlab.NewAgent{Name: "stranger", Operator: "adv"})
	if err != nil {
		t.Fatal(err)
	}
	// job: a claim another runner accepted and has not published on yet:
	// the stranger may neither publish nor challenge on it.
	sub, _, err := p.CreateAgent(ctx, dotlab.NewAgent{Name: "submitter2", Operator: "adv"})
	if err != nil {
		t.Fatal(err)
	}
	runner, _, err := p.CreateAgent(ctx, dotlab.NewAgent{Name: "runner2", Operator: "adv"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, "adv job"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.NextJob(ctx, runner); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AcceptJob(ctx, runner.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	job = c.ID
	db.Close()
	base = servertest.Start(t, server.Config{DB: "sqlite:" + path, Windows: windows, SettleEvery: time.Hour, Version: "adv", Clock: clock})
	return base, id, job, keys, stranger
}

func advJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestAdvOutputListingReadBeforeRole (finding): PUT /jobs/{id}/outputs
// reads the whole body (up to 32 MiB, io.ReadAll doubling its buffer to
// about 64 MiB allocated) before protocol.PutOutputListing checks the
// claim and the caller's role, so any registered agent makes the server
// allocate and copy 32 MiB per request on a claim it has nothing to do
// with, or on no claim at all; concurrent requests multiply it. The
// cheap checks (who, claim, state: the house rule) should come before the
// body is read.
func TestAdvOutputListingReadBeforeRole(t *testing.T) {
	base, _, job, _, stranger := advServer(t)
	// 95,000 entries of 330 bytes: within both bounds.
	var b bytes.Buffer
	for i := 0; i < 95_000; i++ {
		fmt.Fprintf(&b, `{"name":"out/%0250d.csv","sha256":"%064x"}`+"\n", i, i)
	}
	listing := b.Bytes()
	load, _ := os.ReadFile("/proc/loadavg")
	for _, c := range []advCase{
		{"32 MiB listing, claim with no role", "PUT", "/jobs/" + job + "/outputs", listing},
		{"32 MiB listing, no such claim", "PUT", "/jobs/clm_nosuchclaim/outputs", listing},
	} {
		status, cpu, _, alloc := advMeasure(t, base+"/api/v1", stranger, c)
		t.Logf("%-36s %d  median CPU %6v  alloc %5.1f MiB  (load %s)", c.name, status, cpu.Round(100*time.Microsecond), float64(alloc)/(1<<20), strings.Fields(string(load))[0])
		if status < 400 || status >= 500 {
			t.Errorf("%s: status %d, want a refusal", c.name, status)
		}
		if alloc > 4<<20 {
			t.Errorf("%s: the server allocated %.1f MiB before refusing an agent with no role (the body was read before the role check)", c.name, float64(alloc)/(1<<20))
		}
		if cpu > 20*time.Millisecond {
			t.Errorf("%s: refused after %v of CPU (median of five), want at most 20 ms", c.name, cpu)
		}
	}
}
