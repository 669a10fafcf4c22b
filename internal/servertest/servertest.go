// Package servertest runs the real DotLab server (server.Run: store,
// secret screen, pages, API, settlement clock) in the test's process for
// tests of the packages that talk to one: the CLI, the generated client,
// dotlab mcp and the skill conformance test.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dotlab/dotlab/server"
)

// Start runs server.Run with cfg on a free loopback port until the test
// ends and returns its base URL ("http://127.0.0.1:PORT"). cfg.Addr defaults
// to 127.0.0.1:0 and cfg.Logger to a discarding one; cfg.Ready is Start's.
// The test fails when the server does not start, or does not shut down
// cleanly at the end.
func Start(t testing.TB, cfg server.Config) string {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	served := make(chan error, 1)
	cfg.Ready = ready
	go func() { served <- server.Run(ctx, cfg) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		cancel()
		t.Fatalf("server.Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	return "http://" + addr
}
