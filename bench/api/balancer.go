package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dotlab/dotlab/internal/cluster"
	"github.com/dotlab/dotlab/sqlstore"
)

// topology is one way to serve the write load with real `dotlab serve`
// processes: n servers, reached directly (n = 1) or through HAProxy.
type topology struct {
	name    string
	servers int
	lb      bool
}

// balancerRows (bench/README.md "Scale-out") measure the runner write cycle against real
// `dotlab serve` processes, each on its own store loaded alike: one server
// reached directly, the same through HAProxy (what the balancer costs),
// and on PostgreSQL two servers through HAProxy (what a second server
// buys). The ratios are to the direct server. The processes serve with the
// rate limits on but far above the load, as the in-process rows do, and
// with c.pool PostgreSQL connections each.
func balancerRows(ctx context.Context, c config, st *stores) ([]row, error) {
	tops := []topology{{"1 server, direct", 1, false}, {"1 server through HAProxy", 1, true}}
	if c.engine == sqlstore.Postgres {
		tops = append(tops, topology{"2 servers through HAProxy", 2, true})
	}
	tmp, err := os.MkdirTemp("", "dotlab-bench-procs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := c.dotlab
	if bin == "" {
		fmt.Println("  go build ./cmd/dotlab …")
		if bin, err = cluster.Build(tmp); err != nil {
			return nil, err
		}
	}
	fmt.Printf("processes: %s, haproxy %s, %d PostgreSQL connections a server\n", bin, haproxyVersion(), c.pool)
	var reads, writes []row
	var directR, directW float64
	for i, top := range tops {
		fmt.Printf("  %s …\n", top.name)
		r, w, err := runTopology(ctx, c, st, bin, tmp, top, i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", top.name, err)
		}
		rr := row{name: "GET /claims/{id}, " + top.name, r: r, unit: "req/s"}
		rw := row{name: "next+accept+runs, " + top.name, r: w, unit: "cycles/s"}
		if i == 0 {
			rr.group, rw.group = "processes", "processes"
			directR, directW = r.rate(), w.rate()
		} else {
			rr.ratio, rr.target = ratio(r.rate(), directR), "vs direct"
			rw.ratio, rw.target = ratio(w.rate(), directW), "vs direct"
		}
		reads, writes = append(reads, rr), append(writes, rw)
	}
	return append(reads, writes...), nil
}

// runTopology loads a fresh store, starts top's servers (and HAProxy) on
// it, runs the read load (GET /claims/{id} on the first c.claims claims)
// and then the real write load through them, and stops them.
func runTopology(ctx context.Context, c config, st *stores, bin, tmp string, top topology, n int) (reads, writes result, err error) {
	l, err := openLoaded(ctx, st, fmt.Sprintf("procs_%d", n), c.writeClaims, c.writeAnalyze())
	if err != nil {
		return reads, writes, err
	}
	_, keys, err := makeAgents(ctx, l.db, c.conns)
	l.close() // the processes serve it from here on
	if err != nil {
		return reads, writes, err
	}
	db := l.url
	if c.engine == sqlstore.Postgres {
		db += fmt.Sprintf("&pool_max_conns=%d", c.pool)
	}
	unlimited := []string{"--rate-agent", "1e9", "--rate-agent-burst", "1000000000", "--rate-anon", "1e9", "--rate-anon-burst", "1000000000"}
	dir := filepath.Join(tmp, fmt.Sprint(n))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return reads, writes, err
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var servers []*cluster.Server
	defer func() {
		for _, s := range servers {
			if err := s.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	for i := range top.servers {
		s, err := cluster.NewServer(fmt.Sprintf("s%d", i+1), bin, db, dir, unlimited...)
		if err == nil {
			err = s.Start(startCtx)
		}
		if err != nil {
			return reads, writes, err
		}
		servers = append(servers, s)
	}
	base := servers[0].URL()
	if top.lb {
		h, err := cluster.StartHAProxy(startCtx, cluster.HAProxyBin, dir, servers, cluster.HAProxyOptions{NoRequestLog: !c.lbLog})
		if err != nil {
			return reads, writes, err
		}
		defer h.Stop()
		base = h.URL()
	}
	wrk, _ := exec.LookPath("wrk")
	if c.noWrk {
		wrk = ""
	}
	load := readLoad{wrk: wrk, conns: c.conns, threads: c.threads, d: c.d, claims: min(c.claims, c.writeClaims), tmp: dir}
	if reads, err = load.run(base); err != nil {
		return reads, writes, err
	}
	stopWaits := st.waits(c.pgWaits)
	defer stopWaits(top.name + ", writes")
	writes, err = runRealWrites(base, keys, c.d, 0)
	return reads, writes, err
}

// haproxyVersion is the first line of `haproxy -v`.
func haproxyVersion() string {
	out, err := exec.Command(cluster.HAProxyBin, "-v").Output()
	if err != nil {
		return "not found (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(strings.TrimPrefix(line, "HAProxy version "))
}
