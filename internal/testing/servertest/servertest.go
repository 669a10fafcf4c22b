// Package servertest runs the real DotLab server (server.Run: store,
// secret screen, pages, API, settlement clock) in the test's process for
// tests of the packages that talk to one: the CLI, the generated client,
// dotlab mcp and the skill conformance test; and the API alone on a test's
// own store (API) for the tests that need its clock or its rows.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/leakcheck"
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

// The secret screen is built once per test binary: its rules take a
// moment to compile, and it is safe for concurrent use.
var (
	leaksOnce sync.Once
	leaks     *leakcheck.Checker
	leaksErr  error
)

// Leaks is the real secret screen (leakcheck.New), shared by a test
// binary's servers.
func Leaks(t testing.TB) *leakcheck.Checker {
	t.Helper()
	leaksOnce.Do(func() { leaks, leaksErr = leakcheck.New() })
	if leaksErr != nil {
		t.Fatal(leaksErr)
	}
	return leaks
}

// API serves the API of cfg (on the test's own store; Leaks defaults to
// the real screen) on a loopback httptest server until the test ends, live
// streams ended first so that closing does not wait for them. It is for
// tests that hold the store themselves (a test clock, writes behind the
// API's back); Start runs the whole server.
func API(t testing.TB, cfg httpapi.Config) (*httptest.Server, *httpapi.Server) {
	t.Helper()
	if cfg.Leaks == nil {
		cfg.Leaks = Leaks(t)
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Close()
		srv.Close()
	})
	return srv, api
}
