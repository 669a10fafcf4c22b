package mcpserver_test

// The tests drive `dotlab mcp` as an agent host does: the built dotlab
// binary started over stdio by the SDK's own client (mcp.CommandTransport),
// against a real server (server.Run on a SQLite file) with agents
// registered by `dotlab agent register`. Every answer is recorded, and the
// tests check at the end that none ever held an agent's key.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/mcpserver"
	"github.com/dotlab/dotlab/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dotlabBin is the dotlab binary built once for the package's tests.
var dotlabBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dotlab-mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dotlabBin = filepath.Join(dir, "dotlab")
	build := exec.Command("go", "build", "-o", dotlabBin, "../cmd/dotlab")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dotlab:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testServer is a real server on a SQLite file in a temporary directory.
type testServer struct {
	base string // http://127.0.0.1:PORT
	db   string // the SQLite file
}

// startServer runs server.Run (the server of `dotlab serve`, with the
// protocol's default windows and quorum and private URLs admitted, as a
// private deployment or the demo) until the test ends.
func startServer(t *testing.T) *testServer {
	t.Helper()
	db := filepath.Join(t.TempDir(), "dotlab.db")
	base := servertest.Start(t, server.Config{DB: "sqlite:" + db, Windows: dotlab.DefaultWindows, SettleEvery: 50 * time.Millisecond,
		AllowPrivateURLs: true, Version: "mcp-test"})
	return &testServer{base: base, db: db}
}

// registered is an agent registered by `dotlab agent register` into its
// own config dir.
type registered struct {
	name, id, key, config string
}

// register runs `dotlab agent register` with a fresh config dir.
func register(t *testing.T, base, name, caps string) *registered {
	t.Helper()
	cfg := t.TempDir()
	cmd := exec.Command(dotlabBin, "agent", "register", "--server", base, "--name", name, "--operator", "mcp tests", "--capabilities", caps)
	cmd.Env = append(os.Environ(), "DOTLAB_CONFIG_DIR="+cfg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("register %s: %v\n%s", name, err, out)
	}
	all, err := agent.LoadCredentials(filepath.Join(cfg, "agents.json"))
	if err != nil || len(all) != 1 {
		t.Fatalf("credentials of %s: %v %v", name, all, err)
	}
	for _, c := range all {
		if strings.Contains(string(out), c.APIKey) {
			t.Fatalf("register printed the key")
		}
		return &registered{name: name, id: c.AgentID, key: c.APIKey, config: cfg}
	}
	return nil
}

// recorder keeps every answer of every session, to check for keys.
type recorder struct {
	mu      sync.Mutex
	answers []string
}

func (r *recorder) add(what string, v any) {
	b, _ := json.Marshal(v)
	r.mu.Lock()
	r.answers = append(r.answers, what+": "+string(b))
	r.mu.Unlock()
}

// noKeys fails when any recorded answer holds one of the keys.
func (r *recorder) noKeys(t *testing.T, agents ...*registered) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) == 0 {
		t.Fatal("no answers recorded")
	}
	for _, a := range r.answers {
		for _, ag := range agents {
			secret := strings.TrimPrefix(ag.key, "dlk_")
			if strings.Contains(a, ag.key) || strings.Contains(a, secret) {
				t.Errorf("an answer holds %s's key: %.300s", ag.name, a)
			}
		}
	}
}

// session is one `dotlab mcp` process and the SDK client's session to it.
type session struct {
	t        *testing.T
	cs       *mcp.ClientSession
	rec      *recorder
	stderr   *bytes.Buffer
	progress *progressLog
}

type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

// all returns the progress messages received so far.
func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.msgs...)
}

// connect starts `dotlab mcp ARGS` as ag (its config dir, no key in the
// environment) and connects the SDK's client over stdio.
func connect(t *testing.T, ag *registered, rec *recorder, args ...string) *session {
	t.Helper()
	pl := &progressLog{}
	c := mcp.NewClient(&mcp.Implementation{Name: "dotlab-mcp-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			rec.add("progress", req.Params)
			pl.mu.Lock()
			pl.msgs = append(pl.msgs, req.Params.Message)
			pl.mu.Unlock()
		}})
	cmd := exec.Command(dotlabBin, append([]string{"mcp"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DOTLAB_CONFIG_DIR=" + ag.config}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect %s: %v\n%s", ag.name, err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if t.Failed() {
			t.Logf("dotlab mcp (%s) stderr:\n%s", ag.name, stderr.String())
		}
		rec.add("stderr", stderr.String())
	})
	return &session{t: t, cs: cs, rec: rec, stderr: &stderr, progress: pl}
}

// call calls a tool (with a progress token when progress is set) and
// records the answer.
func (s *session) call(name string, args map[string]any, progress bool) *mcp.CallToolResult {
	s.t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progress {
		p.SetProgressToken("tok-" + name)
	}
	res, err := s.cs.CallTool(context.Background(), p)
	if err != nil {
		s.t.Fatalf("%s: protocol error %v", name, err)
	}
	s.rec.add(name, res)
	return res
}

// ok calls a tool that must succeed and decodes its structured output.
func ok[T any](s *session, name string, args map[string]any) T {
	s.t.Helper()
	return okWith[T](s, name, args, false)
}

func okWith[T any](s *session, name string, args map[string]any, progress bool) T {
	s.t.Helper()
	res := s.call(name, args, progress)
	if res.IsError {
		s.t.Fatalf("%s(%v): tool error %s", name, args, text(res))
	}
	var out T
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		s.t.Fatalf("%s: structured output %s: %v", name, b, err)
	}
	return out
}

// fails calls a tool that must fail with code and returns its ToolError.
func fails(s *session, name string, args map[string]any, code string) mcpserver.ToolError {
	s.t.Helper()
	res := s.call(name, args, false)
	if !res.IsError {
		s.t.Fatalf("%s(%v): want error %s, got %s", name, args, code, text(res))
	}
	var te mcpserver.ToolError
	if err := json.Unmarshal([]byte(text(res)), &te); err != nil {
		s.t.Fatalf("%s: error text is not a ToolError: %q", name, text(res))
	}
	if te.Code != code {
		s.t.Fatalf("%s(%v): error %s, want %s: %+v", name, args, te.Code, code, te)
	}
	return te
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
