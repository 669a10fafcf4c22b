// Command sse measures live lab-room delivery: N subscribers on one room's
// GET /api/v1/labs/{id}/events stream, messages posted through the API, and
// the latency from the POST returning to each subscriber reading the event.
//
//	go run ./bench/sse [-subscribers 1000] [-messages 50] [-db sqlite|postgres]
//
// The server (real httpapi over a real store) and the subscribers run in
// this one process on loopback, so the figure includes client parsing on the
// same two cores. Target (issue "Protocol server, part 2"): p99 < 100 ms for
// 1,000 subscribers.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/sqlstore/sqlstoretest"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	subs := flag.Int("subscribers", 1000, "concurrent SSE subscribers on one room")
	msgs := flag.Int("messages", 50, "messages to post")
	gap := flag.Duration("gap", 100*time.Millisecond, "pause between posts")
	engine := flag.String("db", "sqlite", "sqlite or postgres")
	flag.Parse()
	if err := run(*subs, *msgs, *gap, *engine); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sse:", err)
		os.Exit(1)
	}
}

func run(nsubs, nmsgs int, gap time.Duration, engine string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dotlab-sse-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbURL := "sqlite:" + filepath.Join(dir, "bench.db")
	if engine == "postgres" {
		schema := fmt.Sprintf("bench_sse_%d", time.Now().UnixNano())
		admin, err := sql.Open("pgx", sqlstoretest.PostgresURL())
		if err != nil {
			return err
		}
		defer admin.Close()
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			return err
		}
		defer admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		dbURL = sqlstoretest.PostgresURL() + "&search_path=" + schema
	}
	db, err := sqlstore.Open(ctx, dbURL, sqlstore.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	leaks, err := leakcheck.New()
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{Store: db, Leaks: leaks})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	defer srv.Close()
	defer api.Close()
	base := "http://" + ln.Addr().String()

	// A submitter, a runner in the room.
	sub, _, err := db.CreateAgent(ctx, dotlab.NewAgent{Name: "submitter", Operator: "bench"})
	if err != nil {
		return err
	}
	runner, runnerKey, err := db.CreateAgent(ctx, dotlab.NewAgent{Name: "runner", Operator: "bench"})
	if err != nil {
		return err
	}
	raw := sqlstoretest.ManifestJSON("sse bench")
	m, err := manifest.Parse(raw)
	if err != nil {
		return err
	}
	h, _ := manifest.Hash(raw)
	c, err := db.CreateClaim(ctx, sub.ID, dotlab.NewClaim{Raw: raw, Manifest: m, ManifestHash: h, Field: "bench"})
	if err != nil {
		return err
	}
	if _, _, err := db.NextJob(ctx, runner); err != nil {
		return err
	}
	if _, err := db.AcceptJob(ctx, runner.ID, c.ID); err != nil {
		return err
	}
	if _, err := db.JoinLab(ctx, runner.ID, c.ID, "runner"); err != nil {
		return err
	}

	tr := &http.Transport{MaxIdleConnsPerHost: nsubs + 10, MaxConnsPerHost: 0}
	client := &http.Client{Transport: tr}
	// received[i][k] is when subscriber i read message k.
	received := make([][]time.Time, nsubs)
	var ready, done sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Subscribe from the current end of the room (cursor = all state events seen).
	evs, _ := db.ClaimEvents(ctx, c.ID, 0)
	cursor := fmt.Sprintf("0.%d", evs[len(evs)-1].Seq)
	for i := 0; i < nsubs; i++ {
		ready.Add(1)
		done.Add(1)
		received[i] = make([]time.Time, nmsgs)
		go func(i int) {
			defer done.Done()
			req, _ := http.NewRequestWithContext(sctx, "GET", base+"/api/v1/labs/"+c.ID+"/events", nil)
			req.Header.Set("Last-Event-ID", cursor)
			res, err := client.Do(req)
			if err != nil {
				ready.Done()
				fmt.Fprintln(os.Stderr, "subscribe:", err)
				return
			}
			defer res.Body.Close()
			ready.Done()
			sc := bufio.NewScanner(res.Body)
			got := 0
			for sc.Scan() && got < nmsgs {
				line := sc.Bytes()
				if !bytes.HasPrefix(line, []byte("data: ")) {
					continue
				}
				var msg struct {
					Body string `json:"body"`
					Seq  int64  `json:"seq"`
				}
				if json.Unmarshal(line[6:], &msg) == nil && msg.Seq >= 1 && msg.Seq <= int64(nmsgs) {
					received[i][msg.Seq-1] = time.Now()
					got++
				}
			}
		}(i)
	}
	ready.Wait()
	time.Sleep(500 * time.Millisecond) // let every stream reach its live loop
	posted := make([]time.Time, nmsgs)
	for k := 0; k < nmsgs; k++ {
		body := fmt.Sprintf(`{"type":"note","to":"all","body":"progress %d: compare step, t = 4.062"}`, k)
		req, _ := http.NewRequest("POST", base+"/api/v1/labs/"+c.ID+"/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+runnerKey)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 201 {
			return fmt.Errorf("post: %s", res.Status)
		}
		posted[k] = start
		time.Sleep(gap)
	}
	waitDone := make(chan struct{})
	go func() { done.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case <-time.After(30 * time.Second):
	}
	cancel()
	var lat []time.Duration
	missing := 0
	for i := range received {
		for k, at := range received[i] {
			if at.IsZero() {
				missing++
				continue
			}
			lat = append(lat, at.Sub(posted[k]))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	p99 := pct(0.99)
	verdict := "target met"
	if p99 >= 100*time.Millisecond || missing > 0 {
		verdict = "MISSED"
	}
	fmt.Printf("machine: %d cores, %s, store %s\n", runtime.NumCPU(), runtime.Version(), engine)
	fmt.Printf("subscribers %d, messages %d, deliveries %d, missing %d\n", nsubs, nmsgs, len(lat), missing)
	fmt.Printf("delivery latency (POST sent -> event read): p50 %v  p90 %v  p99 %v  max %v   target p99 < 100ms: %s\n",
		pct(0.5).Round(time.Microsecond), pct(0.9).Round(time.Microsecond), p99.Round(time.Microsecond), pct(1).Round(time.Microsecond), verdict)
	return nil
}
