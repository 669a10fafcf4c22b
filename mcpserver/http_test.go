package mcpserver_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamableHTTPOnLoopback: `dotlab mcp --http 127.0.0.1:PORT` serves
// the same tools over the streamable HTTP transport (the SDK's client
// calls status), refuses a request whose Host is not loopback (DNS
// rebinding), and will not listen on a non-loopback address at all.
func TestStreamableHTTPOnLoopback(t *testing.T) {
	srv := startServer(t)
	bot := register(t, srv.base, "http-bot", "")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DOTLAB_CONFIG_DIR=" + bot.config}

	refused := exec.Command(dotlabBin, "mcp", "--http", "0.0.0.0:0", "--cache", t.TempDir())
	refused.Env = env
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), "only a loopback address") {
		t.Fatalf("--http 0.0.0.0:0: %v %s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(dotlabBin, "mcp", "--http", addr, "--cache", t.TempDir())
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("dotlab mcp --http stderr:\n%s", stderr.String())
		}
	})
	endpoint := "http://" + addr + "/mcp"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("not serving on %s: %v", addr, err)
		}
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rec := &recorder{}
	s := &session{t: t, cs: cs, rec: rec, progress: &progressLog{}}
	if st := ok[mcpserver.StatusOutput](s, "status", nil); st.AgentID != bot.id {
		t.Fatalf("status over HTTP: %+v", st)
	}
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Host = "attacker.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a request for Host attacker.example: %d, want 403", res.StatusCode)
	}
	rec.noKeys(t, bot)
}
