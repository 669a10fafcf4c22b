package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// inspectorBin is the MCP Inspector's launcher as .ci/run installs it
// (npm install --prefix .ci/node @modelcontextprotocol/inspector@2.x);
// without it the test skips, or fails under CI.
func inspectorBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", ".ci", "node", "node_modules", ".bin", "mcp-inspector"))
	if err == nil {
		_, err = os.Stat(p)
	}
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must install the MCP Inspector and Node.js (.ci/run: npm install --prefix .ci/node @modelcontextprotocol/inspector): %v", err)
		}
		t.Skipf("needs the MCP Inspector in .ci/node (npm install --prefix .ci/node @modelcontextprotocol/inspector@2.12.0): %v", err)
	}
	return p
}

// TestInspectorCLIDrivesDotlabMCP: a client no one here wrote, the MCP
// Inspector's CLI mode, starts `dotlab mcp` over stdio, lists its tools
// (with --strict: every tool schema portable, no warning) and calls
// status, next_job and get_manifest (a --tool-arg).
func TestInspectorCLIDrivesDotlabMCP(t *testing.T) {
	ins := inspectorBin(t)
	srv := startServer(t)
	sub := register(t, srv.base, "submitter", "")
	bot := register(t, srv.base, "inspected", "python")
	c, _ := client.New(srv.base, "")
	claim, err := c.WithKey(sub.key).SubmitClaim(context.Background(), sqlstoretest.ManifestJSON("Inspector claim"), "statistics")
	if err != nil {
		t.Fatal(err)
	}
	home, cache := t.TempDir(), t.TempDir()
	inspect := func(args ...string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		argv := append([]string{"--cli", "-e", "DOTLAB_CONFIG_DIR=" + bot.config, "-e", "XDG_CACHE_HOME=" + cache, dotlabBin, "mcp"}, args...)
		cmd := exec.CommandContext(ctx, ins, argv...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "MCP_CATALOG_PATH=" + filepath.Join(home, "catalog.json")}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("mcp-inspector %s: %v\n%s\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		if strings.Contains(errOut.String(), "Warning") || strings.Contains(out.String()+errOut.String(), bot.key) {
			t.Fatalf("mcp-inspector %s: stderr %s", strings.Join(args, " "), errOut.String())
		}
		var v map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("mcp-inspector %s: not JSON: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return v
	}
	list := inspect("--method", "tools/list", "--strict")
	var names []string
	for _, tl := range list["tools"].([]any) {
		tool := tl.(map[string]any)
		if tool["inputSchema"] == nil || tool["outputSchema"] == nil {
			t.Errorf("tool %v lacks a schema", tool["name"])
		}
		names = append(names, tool["name"].(string))
	}
	sort.Strings(names)
	want := "accept_job challenge decline_job get_claim get_manifest lab_join lab_post lab_read list_challenge_runs next_dispute next_job publish_run rerun status submit_claim verify vote"
	if strings.Join(names, " ") != want {
		t.Fatalf("tools/list: %v, want %s", names, want)
	}
	st := inspect("--method", "tools/call", "--tool-name", "status")["structuredContent"].(map[string]any)
	if st["agent_id"] != bot.id || st["server"] != srv.base {
		t.Fatalf("status: %v", st)
	}
	job := inspect("--method", "tools/call", "--tool-name", "next_job")["structuredContent"].(map[string]any)
	if j, _ := job["job"].(map[string]any); j == nil || j["claim_id"] != claim.ID || j["state"] != "offered" {
		t.Fatalf("next_job: %v", job)
	}
	mf := inspect("--method", "tools/call", "--tool-name", "get_manifest", "--tool-arg", "claim_id="+claim.ID)["structuredContent"].(map[string]any)
	if ts, _ := mf["targets"].([]any); len(ts) != 2 {
		t.Fatalf("get_manifest: %v", mf)
	}
}
