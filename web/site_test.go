package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/web"
)

// hostileTitle and hostileBody are full of markup and script: the pages
// must show them as text.
const (
	hostileTitle = `Student 1908 <script>window.__pwned=1</script><b>bold</b> & "quoted" <img src=x onerror="window.__pwned=2">`
	hostileBody  = `look: <script>window.__pwned=3</script><img src=x onerror="window.__pwned=4"> & <a href="javascript:alert(1)">click</a>`
)

// site is a real server (SQLite file, httpapi with the web pages) on a
// loopback port, with a seeded record, that a test can stop and restart on
// the same address.
type site struct {
	t     testing.TB
	url   string // database URL
	clock *sqlstoretest.Clock
	db    *sqlstore.DB
	addr  string
	base  string
	srv   *http.Server
	api   *httpapi.Server

	keys                            map[string]string // agent name → API key
	ids                             map[string]string // agent name → agent id
	runnerKey                       *attest.Key       // runner-ada's signing key
	disputed, reproduced, labClaim  string            // claim ids
	runNotReproduced, runReproduced string            // run ids
}

var windows = dotlab.Windows{Accept: time.Hour, Publish: time.Hour, Challenge: time.Hour, Quorum: 3}

func newSite(t testing.TB) *site {
	t.Helper()
	s := &site{t: t, url: sqlstoretest.URL(t, sqlstore.SQLite), clock: sqlstoretest.NewClock(),
		keys: map[string]string{}, ids: map[string]string{}}
	s.open()
	s.seed()
	s.start("127.0.0.1:0")
	t.Cleanup(s.stop)
	return s
}

func (s *site) open() {
	db, err := sqlstore.Open(context.Background(), s.url, sqlstore.Options{Clock: s.clock, Windows: windows})
	if err != nil {
		s.t.Fatal(err)
	}
	s.db = db
}

// start serves on addr (":0" picks a port; a restart passes the old one).
func (s *site) start(addr string) {
	s.t.Helper()
	var ln net.Listener
	var err error
	for i := 0; ; i++ {
		ln, err = net.Listen("tcp", addr)
		if err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the old socket may linger a moment
	}
	if err != nil {
		s.t.Fatal(err)
	}
	// The pages' public URL is the listener's: the feed, badges' markdown,
	// JSON-LD and citations link back to this server.
	pages, err := web.New(web.Config{Store: s.db, Clock: s.clock, Windows: windows, PublicURL: "http://" + ln.Addr().String()})
	if err != nil {
		s.t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Store: s.db, Clock: s.clock, Leaks: servertest.Leaks(s.t), Pages: pages, EventPoll: 100 * time.Millisecond})
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr, s.base, s.api = ln.Addr().String(), "http://"+ln.Addr().String(), api
	s.srv = &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
}

// stop ends the server as a process exit would: streams cut, store closed.
func (s *site) stop() {
	if s.srv == nil {
		return
	}
	s.api.Close()
	s.srv.Close()
	s.db.Close()
	s.srv = nil
}

// restart stops the server and starts a new one on the same address over
// the same database file.
func (s *site) restart() {
	s.t.Helper()
	addr := s.addr
	s.stop()
	s.open()
	s.start(addr)
}

func (s *site) agent(name string) *dotlab.Agent {
	return s.signer(name, nil)
}

// signer registers name with k's public key (none when k is nil).
func (s *site) signer(name string, k *attest.Key) *dotlab.Agent {
	s.t.Helper()
	n := dotlab.NewAgent{Name: name, Operator: "web test", Capabilities: []string{"cpu"}}
	if k != nil {
		n.PublicKey, n.KeyProof = k.Public().Authorized, k.KeyProof(sqlstoretest.LogOrigin(s.db), name, s.db.Now())
	}
	a, key, err := sqlstoretest.Protocol(s.db).CreateAgent(context.Background(), n)
	if err != nil {
		s.t.Fatal(err)
	}
	s.keys[name], s.ids[name] = key, a.ID
	return a
}

// must returns v or panics with err (a test fixture step that cannot fail
// unless the store is broken; the panic fails the test with its stack).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// seed builds a record through the store's real lifecycle:
//   - disputed: the runner publishes not_reproduced (sd_diff 1.2299 is
//     outside 1.17 ± 0.005, mean_diff matches), a challenger disagrees, three
//     reviewers vote 2-1 for the challenger, so it settles reproduced;
//   - reproduced: the runner publishes reproduced and the window closes;
//   - labClaim: listed with a hostile title; its room has members and messages.
func (s *site) seed() {
	t, ctx := s.t, context.Background()
	s.runnerKey = must(attest.GenerateKey())
	sub, runner, challenger := s.agent("submitter"), s.signer("runner-ada", s.runnerKey), s.agent("challenger-bo")
	var reviewers []*dotlab.Agent
	for i := 0; i < 3; i++ {
		reviewers = append(reviewers, s.agent(fmt.Sprintf("reviewer-%d", i)))
	}
	collab := s.agent("collab-cy")
	s.disputed, s.runNotReproduced = s.publish(sub, runner, "Student 1908: sleep gain (disputed)", "1.58", "1.2299", dotlab.OutcomeNotReproduced, fixtureLogs("1.2299", ""))
	body := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(s.disputed, "1.58", "1.17", dotlab.OutcomeReproduced), ClaimID: s.disputed, Agrees: new(bool)}
	body.Notes = "sd_diff: my rerun gives 1.17 (dividing by n, as Student did); the run's 1.2299 differs by 0.0599"
	must(sqlstoretest.Protocol(s.db).CreateChallenge(ctx, challenger, body, nil))
	rationale := "sd_diff: Student divides by n; 1.17 matches within 0.005, 1.2299 does not"
	for i, v := range []string{"challenger", "runner", "challenger"} {
		if d, found, err := sqlstoretest.Protocol(s.db).NextDispute(ctx, reviewers[i].ID); err != nil || !found || d.ID != s.disputed {
			t.Fatalf("reviewer %d: %v %v", i, found, err)
		}
		must(sqlstoretest.Protocol(s.db).CastVote(ctx, reviewers[i], s.disputed, dotlab.VoteBody{Vote: v, Rationale: rationale + " (" + v + ")"}))
	}
	s.reproduced, s.runReproduced = s.publish(sub, runner, "Fisher 1935: tea tasting", "1.58", "1.17", dotlab.OutcomeReproduced, fixtureLogs("1.17", dotlab.OutcomeReproduced))
	s.clock.Advance(2 * time.Hour)
	must(sqlstoretest.Protocol(s.db).Settle(ctx))
	s.labClaim = must(sqlstoretest.Protocol(s.db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, hostileTitle))).ID
	must(sqlstoretest.Protocol(s.db).JoinLab(ctx, collab.ID, s.labClaim, dotlab.RoleCollaborator))
	for _, m := range []dotlab.LabMessageBody{
		{Type: "note", To: "all", Body: "Reading the manifest: one dataset, seed 1908."},
		{Type: "question", To: "all", Body: "Does analysis.py divide by n or n-1?", Refs: []string{"analysis.py:12"}},
		{Type: "blocker", To: "all", Body: hostileBody},
	} {
		must(sqlstoretest.Protocol(s.db).PostLabMessage(ctx, collab.ID, s.labClaim, m))
	}
	for i := 0; i < 3; i++ {
		// They need a GPU, which no test agent has: only labClaim is drawable.
		must(sqlstoretest.Protocol(s.db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, fmt.Sprintf("Listed claim %d", i), "gpu")))
	}
}

// publish lists a claim as sub, has runner draw it (declining other
// offers) and accept it, publishes a run pinning the SHA-256 of logs and
// uploads them (docs/protocol.md §6 "Logs").
func (s *site) publish(sub, runner *dotlab.Agent, title, mean, sd string, o dotlab.Outcome, logs string) (claimID, runID string) {
	t, ctx := s.t, context.Background()
	c := must(sqlstoretest.Protocol(s.db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(t, title)))
	for {
		j, found, err := sqlstoretest.Protocol(s.db).NextJob(ctx, runner)
		if err != nil || !found {
			t.Fatalf("draw: %+v %v %v", j, found, err)
		}
		if j.ClaimID == c.ID {
			break
		}
		must(sqlstoretest.Protocol(s.db).DeclineJob(ctx, runner.ID, j.ClaimID, dotlab.DeclineCapabilityMismatch))
	}
	must(sqlstoretest.Protocol(s.db).AcceptJob(ctx, runner.ID, c.ID))
	body := sqlstoretest.RunBody(c.ID, mean, sd, o)
	sum := sha256.Sum256([]byte(logs))
	body.LogsSHA256 = hex.EncodeToString(sum[:])
	if o == dotlab.OutcomeReproduced { // the reproduced run is signed, the other not
		body.Envelope = must(attest.SignRun(ctx, s.runnerKey, body))
	}
	r := must(sqlstoretest.Protocol(s.db).PublishRun(ctx, runner, body, nil))
	must(sqlstoretest.Protocol(s.db).PutJobLogs(ctx, runner.ID, c.ID, []byte(logs)))
	return c.ID, r.ID
}

// fixtureLogs is a run's log with a raw line that is not JSON. With an
// outcome it also has every line the coverage check wants of
// sqlstoretest.RunBody with sd_diff sd (docs/protocol.md §6 "Log
// coverage"); without, it covers only the dataset's hash check.
func fixtureLogs(sd string, complete dotlab.Outcome) string {
	logs := `{"t":"2026-01-01T00:00:01Z","level":"info","step":"inputs","msg":"sleep.csv verified","data":{"name":"sleep","actual":"` + sqlstoretest.DataSHA256 + `"}}
{"t":"2026-01-01T00:00:02Z","level":"info","step":"execute","msg":"python3 analysis.py exited 0","data":{}}
{"t":"2026-01-01T00:00:03Z","level":"warn","step":"compare","msg":"sd_diff outside tolerance","data":{"rerun":"` + sd + `"}}
not json at all <b>raw</b>
`
	if complete == "" {
		return logs
	}
	return logs + `{"t":"2026-01-01T00:00:04Z","level":"info","step":"environment","msg":"image resolved by digest","data":{"digest":"` + sqlstoretest.ImageDigest + `"}}
{"t":"2026-01-01T00:00:05Z","level":"info","step":"execute","msg":"command: python3 analysis.py","data":{"argv":["python3","analysis.py"]}}
{"t":"2026-01-01T00:00:06Z","level":"info","step":"execute","msg":"command exited with status 0","data":{"exit_code":0}}
{"t":"2026-01-01T00:00:07Z","level":"info","step":"outputs","msg":"output results.json","data":{"path":"results.json","sha256":"2222222222222222222222222222222222222222222222222222222222222222"}}
{"t":"2026-01-01T00:00:08Z","level":"info","step":"compare","msg":"mean_diff within tolerance","data":{"name":"mean_diff","rerun":1.58}}
{"t":"2026-01-01T00:00:09Z","level":"info","step":"compare","msg":"sd_diff within tolerance","data":{"name":"sd_diff","rerun":` + sd + `}}
{"t":"2026-01-01T00:00:10Z","level":"info","step":"outcome","msg":"` + string(complete) + `","data":{"outcome":"` + string(complete) + `"}}
`
}

// get fetches a path with an Accept header and returns status and body.
func (s *site) get(path, accept string) (int, http.Header, string) {
	s.t.Helper()
	req := must(http.NewRequest(http.MethodGet, s.base+path, nil))
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res := must(http.DefaultClient.Do(req))
	defer res.Body.Close()
	b := must(io.ReadAll(res.Body))
	return res.StatusCode, res.Header, string(b)
}

// call sends an API request as agent name and returns status and body.
func (s *site) call(method, path, name string, body any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := must(http.NewRequest(method, s.base+path, rd))
	req.Header.Set("Authorization", "Bearer "+s.keys[name])
	req.Header.Set("Content-Type", "application/json")
	res := must(http.DefaultClient.Do(req))
	defer res.Body.Close()
	return res.StatusCode, must(io.ReadAll(res.Body))
}

// post sends a lab message through the API as agent name; it returns the
// message's seq.
func (s *site) post(name, claimID string, m dotlab.LabMessageBody) int64 {
	s.t.Helper()
	b, _ := json.Marshal(m)
	req := must(http.NewRequest(http.MethodPost, s.base+"/api/v1/labs/"+claimID+"/messages", bytes.NewReader(b)))
	req.Header.Set("Authorization", "Bearer "+s.keys[name])
	req.Header.Set("Content-Type", "application/json")
	res := must(http.DefaultClient.Do(req))
	defer res.Body.Close()
	var out dotlab.LabMessage
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		s.t.Fatalf("post message: %d %s", res.StatusCode, body)
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		s.t.Fatal(err)
	}
	return out.Seq
}

// apiJSON decodes GET path into v.
func (s *site) apiJSON(path string, v any) {
	s.t.Helper()
	code, _, body := s.get(path, "application/json")
	if code != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
}

func contains(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}
