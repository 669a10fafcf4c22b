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
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/sqlstore"
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
	db, closeDB, err := openStore(ctx, dir, engine)
	if err != nil {
		return err
	}
	defer closeDB()
	base, stop, err := startServer(db)
	if err != nil {
		return err
	}
	defer stop()
	claimID, runnerKey, cursor, err := openRoom(ctx, db)
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: nsubs + 10, MaxConnsPerHost: 0}
	client := &http.Client{Transport: tr}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	room := base + "/api/v1/labs/" + claimID
	received, done := subscribe(sctx, client, room+"/events", cursor, nsubs, nmsgs)
	time.Sleep(500 * time.Millisecond) // let every stream reach its live loop
	posted, err := post(client, room+"/messages", runnerKey, nmsgs, gap)
	if err != nil {
		return err
	}
	waitDone := make(chan struct{})
	go func() { done.Wait(); close(waitDone) }()
	select {
	case <-waitDone:
	case <-time.After(30 * time.Second):
	}
	cancel()
	report(received, posted, nsubs, nmsgs, engine)
	return nil
}

// openStore opens a fresh store: SQLite in dir, or a new schema on the test
// PostgreSQL server. The returned function closes it and drops the schema.
func openStore(ctx context.Context, dir, engine string) (*sqlstore.DB, func(), error) {
	dbURL := "sqlite:" + filepath.Join(dir, "bench.db")
	drop := func() {}
	if engine == "postgres" {
		schema := fmt.Sprintf("bench_sse_%d", time.Now().UnixNano())
		admin, err := sql.Open("pgx", sqlstoretest.PostgresURL())
		if err != nil {
			return nil, nil, err
		}
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			admin.Close()
			return nil, nil, err
		}
		drop = func() {
			admin.Exec("DROP SCHEMA " + schema + " CASCADE")
			admin.Close()
		}
		dbURL = sqlstoretest.PostgresURL() + "&search_path=" + schema
	}
	db, err := sqlstore.Open(ctx, dbURL, sqlstore.Options{})
	if err != nil {
		drop()
		return nil, nil, err
	}
	return db, func() { db.Close(); drop() }, nil
}

// startServer serves the real API over db on a loopback port and returns
// its base URL and the function that stops it.
func startServer(db *sqlstore.DB) (string, func(), error) {
	leaks, err := leakcheck.New()
	if err != nil {
		return "", nil, err
	}
	// All subscribers and the poster are one client address and one agent:
	// the per-address stream cap and the message quotas are lifted.
	api, err := httpapi.New(httpapi.Config{Store: db, Leaks: leaks, MaxStreamsPerAddr: 1 << 30,
		MessageQuota: httpapi.MessageQuota{PerAgent: -1, PerRoom: -1}})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { api.Close(); srv.Close() }, nil
}

// openRoom lists a claim and has a runner accept it and join its lab room.
// It returns the claim's id, the runner's key and the cursor of the room's
// current end (every state event seen).
func openRoom(ctx context.Context, db *sqlstore.DB) (claimID, runnerKey, cursor string, err error) {
	svc := protocol.New(protocol.Config{Store: db, Unscreened: true})
	sub, _, err := svc.CreateAgent(ctx, dotlab.NewAgent{Name: "submitter", Operator: "bench"})
	if err != nil {
		return "", "", "", err
	}
	runner, runnerKey, err := svc.CreateAgent(ctx, dotlab.NewAgent{Name: "runner", Operator: "bench"})
	if err != nil {
		return "", "", "", err
	}
	raw := sqlstoretest.ManifestJSON("sse bench")
	m, err := manifest.Parse(raw)
	if err != nil {
		return "", "", "", err
	}
	h, _ := manifest.Hash(raw)
	c, err := svc.CreateClaim(ctx, sub.ID, dotlab.NewClaim{Raw: raw, Manifest: m, ManifestHash: h, Field: "bench"})
	if err != nil {
		return "", "", "", err
	}
	if _, _, err := svc.NextJob(ctx, runner); err != nil {
		return "", "", "", err
	}
	if _, err := svc.AcceptJob(ctx, runner.ID, c.ID); err != nil {
		return "", "", "", err
	}
	if _, err := svc.JoinLab(ctx, runner.ID, c.ID, "runner"); err != nil {
		return "", "", "", err
	}
	evs, _ := db.ClaimEvents(ctx, c.ID, 0)
	return c.ID, runnerKey, fmt.Sprintf("0.%d", evs[len(evs)-1].Seq), nil
}

// subscribe opens nsubs streams on the room's events URL from cursor and
// returns once all are open. received[i][k] is when subscriber i read
// message k; done ends when every subscriber has read nmsgs messages (or
// its stream ended).
func subscribe(ctx context.Context, client *http.Client, url, cursor string, nsubs, nmsgs int) ([][]time.Time, *sync.WaitGroup) {
	received := make([][]time.Time, nsubs)
	var ready sync.WaitGroup
	done := &sync.WaitGroup{}
	for i := 0; i < nsubs; i++ {
		ready.Add(1)
		done.Add(1)
		received[i] = make([]time.Time, nmsgs)
		go func(i int) {
			defer done.Done()
			subscriber(ctx, client, url, cursor, received[i], &ready)
		}(i)
	}
	ready.Wait()
	return received, done
}

// subscriber reads one stream, marking ready once it is open, and records
// in received when each message (by its seq) arrives.
func subscriber(ctx context.Context, client *http.Client, url, cursor string, received []time.Time, ready *sync.WaitGroup) {
	nmsgs := len(received)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
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
			received[msg.Seq-1] = time.Now()
			got++
		}
	}
}

// post posts nmsgs notes to the room's messages URL as the runner, gap
// apart, and returns when each POST was sent.
func post(client *http.Client, url, key string, nmsgs int, gap time.Duration) ([]time.Time, error) {
	posted := make([]time.Time, nmsgs)
	for k := 0; k < nmsgs; k++ {
		body := fmt.Sprintf(`{"type":"note","to":"all","body":"progress %d: compare step, t = 4.062"}`, k)
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		res.Body.Close()
		if res.StatusCode != 201 {
			return nil, fmt.Errorf("post: %s", res.Status)
		}
		posted[k] = start
		time.Sleep(gap)
	}
	return posted, nil
}

// report prints the delivery latencies (read time minus post time) and
// whether the target was met.
func report(received [][]time.Time, posted []time.Time, nsubs, nmsgs int, engine string) {
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
}
