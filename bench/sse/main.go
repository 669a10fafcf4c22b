// Command sse measures live lab-room delivery: N subscribers on one room's
// GET /api/v1/labs/{id}/events stream, messages posted through the API, and
// the latency from the POST's acknowledgement (its 201 read: the message
// committed) to each subscriber reading the event.
//
//	go run ./bench/sse [-subscribers 10000] [-procs 0] [-messages 50] [-db sqlite|postgres]
//
// The server (real httpapi over a real store) runs in this process; the
// subscribers run in -procs child processes of this same program (0: one
// per 2,500 subscribers), because one process here may hold at most 20,000
// descriptors and 10,000 streams need 10,000 on each side. Every process is
// on the same two cores, so the figure includes the clients' parsing.
// Receive times are wall-clock (CLOCK_REALTIME, shared by the processes).
// Target (issue 25, "Protocol server, part 2"): p99 < 100 ms from the
// acknowledgement at 10,000 subscribers.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
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
	subs := flag.Int("subscribers", 10000, "concurrent SSE subscribers on one room")
	procs := flag.Int("procs", 0, "subscriber processes (0: one per 2,500 subscribers)")
	msgs := flag.Int("messages", 50, "messages to post")
	gap := flag.Duration("gap", 100*time.Millisecond, "pause between posts")
	engine := flag.String("db", "sqlite", "sqlite or postgres")
	profile := flag.String("profile", "", "write the server process's CPU profile of the posting phase to this file")
	clientURL := flag.String("client", "", "internal: run as a subscriber process on this events URL")
	cursor := flag.String("cursor", "", "internal: the subscriber process's Last-Event-ID")
	flag.Parse()
	var err error
	if *clientURL != "" {
		err = clientMain(*clientURL, *cursor, *subs, *msgs)
	} else {
		err = run(*subs, *procs, *msgs, *gap, *engine, *profile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/sse:", err)
		os.Exit(1)
	}
}

func run(nsubs, nprocs, nmsgs int, gap time.Duration, engine, profile string) error {
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
	room := base + "/api/v1/labs/" + claimID
	if nprocs <= 0 {
		nprocs = (nsubs + 2499) / 2500
	}
	kids, err := startClients(room+"/events", cursor, nsubs, nprocs, nmsgs)
	if err != nil {
		return err
	}
	defer kids.kill()
	time.Sleep(500 * time.Millisecond) // let every stream reach its live loop
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	stopProfile, err := startProfile(profile)
	if err != nil {
		return err
	}
	sent, acked, err := post(client, room+"/messages", runnerKey, nmsgs, gap)
	if err != nil {
		return err
	}
	received, err := kids.collect(30 * time.Second)
	stopProfile()
	if err != nil {
		return err
	}
	report(received, sent, acked, nsubs, nprocs, nmsgs, engine)
	return nil
}

// startProfile starts a CPU profile into path (nothing when empty) and
// returns the function that stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
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

// post posts nmsgs notes to the room's messages URL as the runner, gap
// apart, and returns when each POST was sent and when its 201 was read
// (the acknowledgement: the message is committed).
func post(client *http.Client, url, key string, nmsgs int, gap time.Duration) (sent, acked []time.Time, err error) {
	sent = make([]time.Time, nmsgs)
	acked = make([]time.Time, nmsgs)
	for k := 0; k < nmsgs; k++ {
		body := fmt.Sprintf(`{"type":"note","to":"all","body":"progress %d: compare step, t = 4.062"}`, k)
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		sent[k] = time.Now()
		res, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		acked[k] = time.Now()
		if res.StatusCode != 201 {
			return nil, nil, fmt.Errorf("post: %s", res.Status)
		}
		time.Sleep(gap)
	}
	return sent, acked, nil
}

// report prints the delivery latencies, from the acknowledgement and from
// the sending, and whether the target (p99 from the acknowledgement) was met.
func report(received [][]int64, sent, acked []time.Time, nsubs, nprocs, nmsgs int, engine string) {
	var fromAck, fromSent []time.Duration
	missing := nsubs*nmsgs - len(received)*nmsgs
	for i := range received {
		for k, at := range received[i] {
			if at == 0 || k >= nmsgs {
				missing++
				continue
			}
			t := time.Unix(0, at)
			fromAck = append(fromAck, t.Sub(acked[k]))
			fromSent = append(fromSent, t.Sub(sent[k]))
		}
	}
	var posts []time.Duration
	for k := range sent {
		posts = append(posts, acked[k].Sub(sent[k]))
	}
	p99 := pct(fromAck, 0.99)
	verdict := "target met"
	if p99 >= 100*time.Millisecond || missing > 0 {
		verdict = "MISSED"
	}
	fmt.Printf("machine: %d cores, %s, store %s\n", runtime.NumCPU(), runtime.Version(), engine)
	fmt.Printf("subscribers %d in %d processes, messages %d, deliveries %d, missing %d\n", nsubs, nprocs, nmsgs, len(fromAck), missing)
	fmt.Printf("POST -> 201: p50 %v  p99 %v\n", r(pct(posts, 0.5)), r(pct(posts, 0.99)))
	fmt.Printf("from the acknowledgement: p50 %v  p90 %v  p99 %v  max %v   target p99 < 100ms: %s\n",
		r(pct(fromAck, 0.5)), r(pct(fromAck, 0.9)), r(p99), r(pct(fromAck, 1)), verdict)
	fmt.Printf("from the sending:         p50 %v  p90 %v  p99 %v  max %v\n",
		r(pct(fromSent, 0.5)), r(pct(fromSent, 0.9)), r(pct(fromSent, 0.99)), r(pct(fromSent, 1)))
}

// pct returns the p-quantile of lat (sorted in place); 0 when empty.
func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[int(p*float64(len(lat)-1))]
}

func r(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
