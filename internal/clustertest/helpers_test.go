package clustertest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab/internal/cluster"
	_ "github.com/dotlab/dotlab/sqlstore" // registers the "sqlite" and "pgx" drivers
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// dotlabBin builds the dotlab command once per test binary.
func dotlabBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "dotlab-cluster-bin-")
		if buildErr == nil {
			binPath, buildErr = cluster.Build(buildDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// needHAProxy skips without Debian's haproxy, except under CI=true.
func needHAProxy(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(cluster.HAProxyBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must provide %s (Debian package haproxy)", cluster.HAProxyBin)
		}
		t.Skipf("needs %s (Debian package haproxy)", cluster.HAProxyBin)
	}
}

// startCluster starts n `dotlab serve` processes on db (each with args)
// and HAProxy in front of them; everything is stopped when the test ends,
// and the processes' log tails are printed when it failed.
func startCluster(t *testing.T, db string, n int, args ...string) ([]*cluster.Server, *cluster.HAProxy) {
	t.Helper()
	bin, dir := dotlabBin(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var servers []*cluster.Server
	t.Cleanup(func() {
		for _, s := range servers {
			s.Kill()
			if t.Failed() {
				t.Logf("--- %s log (tail)\n%s", s.Name, cluster.Tail(s.LogPath, 30))
			}
		}
	})
	// The balancer is the servers' trusted proxy, as docs/deploy.md sets it
	// up (its connections are not held to the per-address limits), and the
	// lab message quotas are off with the rate limits the tests turn off.
	args = append([]string{"--trusted-proxy", "127.0.0.1", "--msg-agent", "-1", "--msg-room", "-1"}, args...)
	for i := range n {
		name := fmt.Sprintf("s%d", i+1)
		s, err := cluster.NewServer(name, bin, withAppName(db, name), dir, args...)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
		// One at a time: the first start makes the log's signing key.
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, err := cluster.StartHAProxy(ctx, cluster.HAProxyBin, dir, servers, cluster.HAProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return servers, h
}

// withAppName gives a PostgreSQL URL application_name dotlab-NAME, so
// that pg_stat_activity tells which server a backend serves (SQLite URLs
// as they are).
func withAppName(db, name string) string {
	if !strings.HasPrefix(db, "postgres") {
		return db
	}
	sep := "?"
	if strings.Contains(db, "?") {
		sep = "&"
	}
	return db + sep + "application_name=dotlab-" + name
}

// cli runs the dotlab binary with DOTLAB_CONFIG_DIR=cfg and returns its
// stdout, stderr and exit code.
func cli(t *testing.T, cfg string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(dotlabBin(t), args...)
	cmd.Env = append(os.Environ(), "DOTLAB_CONFIG_DIR="+cfg)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("dotlab %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// register runs `dotlab agent register` with a new config dir and returns
// the dir (holding the agent's key).
func register(t *testing.T, server, name string) string {
	t.Helper()
	cfg, err := registerIn(t.TempDir(), server, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// registerIn registers agent name with a new config dir under dir (safe
// to call from any goroutine).
func registerIn(dir, server, name string) (string, error) {
	cfg := filepath.Join(dir, name)
	cmd := exec.Command(binPath, "agent", "register", "--server", server, "--name", name, "--operator", "cluster tests")
	cmd.Env = append(os.Environ(), "DOTLAB_CONFIG_DIR="+cfg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("register %s: %v %s", name, err, out)
	}
	return cfg, nil
}

// agentKey reads the API key `dotlab agent register` stored in cfg.
func agentKey(t *testing.T, cfg, server string) (id, key string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg, "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]struct {
		AgentID string `json:"agent_id"`
		APIKey  string `json:"api_key"`
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	c, ok := all[server]
	if !ok {
		t.Fatalf("%s: no key for %s", cfg, server)
	}
	return c.AgentID, c.APIKey
}

// call sends one request (no retries: every answer is seen) and decodes a
// 2xx JSON answer into out (when not nil). It returns the status.
func call(hc *http.Client, method, url, key string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode/100 != 2 {
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %w", method, url, err)
		}
	}
	return res.StatusCode, nil
}

// rawDB is the database behind a store, opened for checks by SQL.
type rawDB struct {
	*sql.DB
	sqlite bool
}

// openRaw opens the database behind a store URL (SQLite read-only).
func openRaw(t *testing.T, dbURL string) rawDB {
	t.Helper()
	driver, dsn := "pgx", dbURL
	p, sqlite := strings.CutPrefix(dbURL, "sqlite:")
	if sqlite {
		driver, dsn = "sqlite", "file:"+p+"?mode=ro&_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return rawDB{db, sqlite}
}

// counts runs a query of (key, count) rows and returns them as a map.
func counts(t *testing.T, db rawDB, q string, args ...any) map[string]int {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// statuses counts the balancer's logged answers by status class
// ("2xx", "5xx", …; "none" for -1: no answer sent).
func statuses(t *testing.T, h *cluster.HAProxy) (map[string]int, []cluster.Request) {
	t.Helper()
	reqs, err := h.Requests()
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	var bad []cluster.Request
	for _, r := range reqs {
		k := fmt.Sprintf("%dxx", r.Status/100)
		if r.Status < 0 {
			k = "none"
		}
		by[k]++
		if r.Status >= 500 || r.Status < 0 {
			bad = append(bad, r)
		}
	}
	return by, bad
}

// reportBad fails the test for the requests in bad, naming the first ten.
func reportBad(t *testing.T, bad []cluster.Request, why string) {
	t.Helper()
	for i, r := range bad {
		if i == 10 {
			t.Errorf("… and %d more", len(bad)-10)
			break
		}
		t.Errorf("balancer logged %d %s %s from %s at %s (%s) %s", r.Status, r.Method, r.Path, r.Server,
			r.Accepted.Format("15:04:05.000"), r.Termination, why)
	}
}
