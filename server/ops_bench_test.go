package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/metrics"
	"github.com/dotlab/dotlab/sqlstore"
)

// BenchmarkOpsOverhead measures what the ops layer (the outer mux for
// /healthz, /readyz and /metrics, and the request metrics) adds to the
// hottest read, GET /api/v1/claims/{id} on SQLite, side by side with the
// API handler alone, in one run:
//
//	go test -run '^$' -bench OpsOverhead ./server/
func BenchmarkOpsOverhead(b *testing.B) {
	db := sqlstoretest.Open(b, sqlstore.SQLite, sqlstore.Options{})
	cfg := DefaultConfig()
	cfg.AgentLimit.PerSecond, cfg.AnonymousLimit.PerSecond = 0, 0
	cfg.Clock, cfg.Logger = dotlab.SystemClock{}, slog.New(slog.NewTextHandler(io.Discard, nil))
	api, err := handler(db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	sub, _, err := sqlstoretest.Protocol(db).CreateAgent(context.Background(), dotlab.NewAgent{Name: "s", Operator: "t"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := sqlstoretest.Protocol(db).CreateClaim(context.Background(), sub.ID, sqlstoretest.NewClaim(b, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	o := &ops{db: db, dialect: "sqlite", logger: cfg.Logger, metrics: metrics.New(metrics.Config{Subscribers: api.Streams, DrawRoute: "GET /api/v1/jobs/next"})}
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"api", api}, {"with-ops", o.handler(api)}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					h.h.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/claims/"+c.ID, nil))
					if w.Code != 200 {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}
