package clustertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/cluster"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/sqlstore"
	git "github.com/go-git/go-git/v5"
)

const (
	raceServers = 3
	raceClaims  = 50
	raceRunners = 200
)

// TestRunnersRaceThroughBalancer (docs/deploy.md): three `dotlab
// serve` processes on one fresh PostgreSQL database behind HAProxy; 50
// claims listed with `dotlab claim submit`; 200 runner processes, each its
// own agent (`dotlab agent register`, then `dotlab runner --once`), race
// for the 50 jobs through the balancer. The 50 that draw one rerun it for
// real (a busybox image in runc, its dataset and code fetched over HTTP and
// git from loopback); the other 150 find nothing. Each job is assigned
// exactly once (one job row, one `assigned` event and one `offer` log entry
// per claim; no agent holds two), every claim settles exactly once when its
// (15 s) challenge window closes — three settlement clocks race for it —,
// `dotlab verify` passes for every claim, and HAProxy logged no 5xx.
func TestRunnersRaceThroughBalancer(t *testing.T) {
	testfix.Exclusive(t)
	testfix.Need(t, true, "runc", "busybox", "git")
	needHAProxy(t)
	if testing.Short() {
		t.Skip("-short: 200 processes and 50 sandboxes")
	}
	pg := sqlstoretest.URL(t, sqlstore.Postgres)
	// 8 connections a server: three at the default 32 would take 96 of
	// PostgreSQL's default 100 (sqlstore.PoolSize), which other tests share.
	servers, lb := startCluster(t, pg+"&pool_max_conns=8", raceServers, "--allow-private-urls", "--accept-window", "3m", "--publish-window", "5m",
		"--challenge-window", "15s", "--settle-every", "250ms", "--rate-agent", "0", "--rate-anon", "0")
	server := lb.URL()
	cache := t.TempDir()
	manifests := raceManifests(t, cache, raceClaims)
	sub := register(t, server, "submitter")
	for _, m := range manifests {
		if out, errOut, code := cli(t, sub, "claim", "submit", m, "--server", server, "--field", "statistics", "--allow-private-urls"); code != 0 {
			t.Fatalf("claim submit: %d %s %s", code, out, errOut)
		}
	}
	cfgs := registerRunners(t, server, raceRunners)

	t0 := time.Now()
	results := raceRunnerProcesses(t, server, cache, cfgs)
	t.Logf("%d runner processes ran in %s", len(results), time.Since(t0).Round(time.Millisecond))
	won := map[string]string{} // claim → runner name
	empty := 0
	accepted := regexp.MustCompile(`(DL-\d+): accepted`)
	for i, r := range results {
		switch m := accepted.FindStringSubmatch(r.stderr); {
		case r.code != 0:
			t.Errorf("runner %d: exit %d\n%s", i, r.code, r.stderr)
		case m != nil:
			if prev, dup := won[m[1]]; dup {
				t.Errorf("%s accepted by runner %d and %s", m[1], i, prev)
			}
			won[m[1]] = fmt.Sprint(i)
			if !strings.Contains(r.stderr, "published run_") {
				t.Errorf("runner %d took %s but did not publish:\n%s", i, m[1], r.stderr)
			}
		case strings.Contains(r.stderr, "nothing to do"):
			empty++
		default:
			t.Errorf("runner %d: neither a job nor nothing to do:\n%s", i, r.stderr)
		}
	}
	if len(won) != raceClaims || empty != raceRunners-raceClaims {
		t.Fatalf("%d runners took a job and %d found nothing; want %d and %d", len(won), empty, raceClaims, raceRunners-raceClaims)
	}
	waitSettled(t, server, raceClaims, 2*time.Minute)
	checkAssignedOnce(t, pg)
	for i := range raceClaims {
		id := fmt.Sprintf("DL-%04d", i+1)
		if out, errOut, code := cli(t, sub, "verify", id, "--server", server); code != 0 {
			t.Errorf("dotlab verify %s: %d\n%s%s", id, code, out, errOut)
		}
	}
	by, bad := statuses(t, lb)
	t.Logf("balancer answers: %v", by)
	reportBad(t, bad, "")
	perServer := map[string]int{}
	reqs, _ := lb.Requests()
	draws := 0
	for _, r := range reqs {
		perServer[r.Server]++
		if r.Method == "GET" && r.Path == "/api/v1/jobs/next" {
			draws++
		}
	}
	// The race is real: the draws overlapped at the balancer.
	inFlight := cluster.MaxInFlight(reqs, "GET", "/api/v1/jobs/next")
	t.Logf("%d draws, at most %d in flight at once", draws, inFlight)
	if draws != raceRunners || inFlight < 2 {
		t.Errorf("%d draws (want %d), at most %d at once (want several)", draws, raceRunners, inFlight)
	}
	t.Logf("requests per server: %v", perServer)
	for _, s := range servers {
		// An internal error is logged even when a retry hid it from the client.
		if b, err := os.ReadFile(s.LogPath); err != nil || strings.Contains(string(b), "level=ERROR") {
			t.Errorf("%s logged errors (%v):\n%s", s.Name, err, cluster.Tail(s.LogPath, 10))
		}
	}
	if len(perServer) != raceServers {
		t.Errorf("requests reached %d servers, want %d: %v", len(perServer), raceServers, perServer)
	}
}

// raceManifests builds the busybox image into cache with `dotlab image
// build`, serves a dataset and a git repository on loopback, and writes n
// manifests (distinct titles) naming them.
func raceManifests(t *testing.T, cache string, n int) []string {
	t.Helper()
	out, errOut, code := cli(t, t.TempDir(), "image", "build", testfix.BusyboxRootfs(t), "--ref", "localhost/test/busybox", "--cache", cache)
	if code != 0 {
		t.Fatalf("image build: %d %s", code, errOut)
	}
	digest := strings.Fields(out)[0]
	data := []byte("x\n1\n2\n")
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(data) }))
	t.Cleanup(files.Close)
	sum := sha256.Sum256(data)
	gitRoot := t.TempDir()
	repo, err := git.PlainInit(filepath.Join(gitRoot, "code"), false)
	if err != nil {
		t.Fatal(err)
	}
	commit := testfix.Commit(t, repo, filepath.Join(gitRoot, "code"), map[string]string{
		"run.sh": `awk -F, 'NR > 1 { s += $1 } END { printf "{\"total\": %d}\n", s }' "$DOTLAB_DATA_DIR/d.csv" > "$DOTLAB_OUT_DIR/results.json"` + "\n",
	})
	gitURL := testfix.GitHTTP(t, gitRoot) + "/code"
	dir := t.TempDir()
	var paths []string
	for i := range n {
		m := fmt.Sprintf(`{"spec_version":"0.1","title":"race claim %d","source":{"citation":"cluster test"},
 "datasets":[{"name":"d.csv","url":"%s/d.csv","sha256":"%s"}],
 "code":{"repository":"%s","commit":"%s"},
 "environment":{"image":"localhost/test/busybox@%s"},
 "entrypoint":["sh","run.sh"],
 "targets":[{"name":"total","value":3,"tolerance":{"type":"absolute","value":0}}]}`,
			i+1, files.URL, hex.EncodeToString(sum[:]), gitURL, commit, digest)
		p := filepath.Join(dir, fmt.Sprintf("m%d.json", i))
		if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// registerRunners registers n runner agents through the balancer, 8
// registrations at a time, and returns their config dirs.
func registerRunners(t *testing.T, server string, n int) []string {
	t.Helper()
	dotlabBin(t)
	cfgs, errs := make([]string, n), make([]error, n)
	dir := t.TempDir()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cfgs[i], errs[i] = registerIn(dir, server, fmt.Sprintf("runner-%03d", i))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return cfgs
}

type procResult struct {
	code   int
	stderr string
}

// raceRunnerProcesses starts `dotlab runner --once` for every config dir,
// all at once, and waits for them all (5 minutes at most).
func raceRunnerProcesses(t *testing.T, server, cache string, cfgs []string) []procResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results := make([]procResult, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		cmd := exec.CommandContext(ctx, dotlabBin(t), "runner", "--server", server, "--once", "--allow-private-urls",
			"--cache", cache, "--work", filepath.Join(cfg, "work"))
		cmd.Env = append(os.Environ(), "DOTLAB_CONFIG_DIR="+cfg)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			results[i] = procResult{stderr: errOut.String()}
			if ee, ok := err.(*exec.ExitError); ok {
				results[i].code = ee.ExitCode()
			} else if err != nil {
				results[i].code = -1
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("runner processes still running after 5 minutes")
	}
	return results
}

// waitSettled waits until n claims are settled (GET /claims?state=settled).
func waitSettled(t *testing.T, server string, n int, d time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(d)
	for {
		var page apiv1.ClaimPage
		_, err := call(hc, "GET", server+"/api/v1/claims?state=settled&limit=200", "", nil, &page)
		if err == nil && len(page.Claims) >= n {
			for _, c := range page.Claims {
				if c.Outcome != dotlab.OutcomeReproduced {
					t.Errorf("%s settled %s, want reproduced", c.ID, c.Outcome)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d claims settled after %s (%v)", len(page.Claims), n, d, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkAssignedOnce checks, by SQL on the shared database, that every
// claim had exactly one job (published), one assigned and one settled
// event, and one offer, run and settlement log entry, and that no agent
// held two jobs.
func checkAssignedOnce(t *testing.T, dbURL string) {
	t.Helper()
	db := openRaw(t, dbURL)
	check := func(what, q string, want int) {
		t.Helper()
		got := counts(t, db, q)
		if len(got) != raceClaims {
			t.Errorf("%s: %d claims, want %d", what, len(got), raceClaims)
		}
		for k, n := range got {
			if n != want {
				t.Errorf("%s: %s has %d, want %d", what, k, n, want)
			}
		}
	}
	check("jobs per claim", `SELECT claim_id, COUNT(*) FROM jobs GROUP BY claim_id`, 1)
	check("published jobs per claim", `SELECT claim_id, COUNT(*) FROM jobs WHERE state = 'published' GROUP BY claim_id`, 1)
	check("jobs per runner that got one", `SELECT agent_id, COUNT(*) FROM jobs GROUP BY agent_id`, 1)
	check("runs per claim", `SELECT claim_id, COUNT(*) FROM runs GROUP BY claim_id`, 1)
	check("assigned events per claim", `SELECT claim_id, COUNT(*) FROM claim_events WHERE state = 'assigned' GROUP BY claim_id`, 1)
	check("settled events per claim", `SELECT claim_id, COUNT(*) FROM claim_events WHERE state = 'settled' GROUP BY claim_id`, 1)
	for _, typ := range []string{"offer", "run", "settlement"} {
		check(typ+" log entries per claim", `SELECT claim_id, COUNT(*) FROM log_entries WHERE type = '`+typ+`' GROUP BY claim_id`, 1)
	}
	var size, entries, maxIdx int
	if err := db.QueryRow(`SELECT (SELECT size FROM log_head), COUNT(*), COALESCE(MAX(idx), -1) + 1 FROM log_entries`).Scan(&size, &entries, &maxIdx); err != nil {
		t.Fatal(err)
	}
	if size != entries || entries != maxIdx {
		t.Errorf("log: head size %d, %d entries, indexes up to %d: want no gap or duplicate", size, entries, maxIdx)
	}
}
