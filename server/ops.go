package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/metrics"
)

// The routes for balancers and operators (docs/deploy.md "Health and
// readiness", "Metrics"), outside /api/v1 and outside the rate limits:
//
//	GET /healthz  200 {"status":"ok"} while serving; 503 unavailable once draining
//	GET /readyz   200 Ready when the database answers within ReadyTimeout and
//	              its schema is at this binary's latest migration; else 503
//	              unavailable, one detail line per check that failed
//	GET /metrics  the Prometheus text format (package metrics)

// ReadyTimeout bounds the database checks of one GET /readyz.
const ReadyTimeout = 2 * time.Second

// Health is the 200 body of GET /healthz.
type Health struct {
	Status string `json:"status"` // "ok"
}

// Ready is the 200 body of GET /readyz.
type Ready struct {
	Status        string `json:"status"`         // "ready"
	Database      string `json:"database"`       // sqlite or postgres
	SchemaVersion int64  `json:"schema_version"` // the goose version applied (= the latest embedded)
}

// schemaReader is what readiness reads from the store (sqlstore.DB).
type schemaReader interface {
	SchemaVersion(ctx context.Context) (applied, latest int64, err error)
}

// ops serves /healthz, /readyz and /metrics, and says whether the server
// is draining.
type ops struct {
	db       schemaReader
	dialect  string
	logger   *slog.Logger
	metrics  *metrics.Metrics
	draining atomic.Bool
}

// handler is the whole server: the ops routes, then everything else to
// the API and pages, all counted and timed by m.
func (o *ops) handler(api *httpapi.Server) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", o.healthz)
	mux.HandleFunc("GET /readyz", o.readyz)
	mux.Handle("GET /metrics", o.metrics.Handler())
	mux.Handle("/", api)
	return o.metrics.Instrument(mux, api.Pattern)
}

func (o *ops) healthz(w http.ResponseWriter, r *http.Request) {
	if o.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, drainingBody())
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
}

func drainingBody() apiv1.ErrorBody {
	return apiv1.ErrorBody{Error: dotlab.EUNAVAILABLE, Detail: []string{
		"draining: this server is shutting down (SIGTERM); it finishes what it has in flight, send new requests to another server"}}
}

func (o *ops) readyz(w http.ResponseWriter, r *http.Request) {
	if o.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, drainingBody())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	applied, latest, err := o.db.SchemaVersion(ctx)
	var detail []string
	switch {
	case err != nil:
		// The error text stays in the server's log; the body says which check.
		o.logger.Warn("readyz: the database check failed", "err", err)
		detail = append(detail, fmt.Sprintf("database: the %s database could not be read within %s (the server's log says why)", o.dialect, ReadyTimeout),
			"migrations: not checked (the database could not be read)")
	case applied != latest:
		detail = append(detail, fmt.Sprintf("migrations: the database schema is at version %d, this server's latest migration is %d: %s",
			applied, latest, schemaAdvice(applied, latest)))
	}
	if len(detail) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, apiv1.ErrorBody{Error: dotlab.EUNAVAILABLE, Detail: detail})
		return
	}
	writeJSON(w, http.StatusOK, Ready{Status: "ready", Database: o.dialect, SchemaVersion: applied})
}

func schemaAdvice(applied, latest int64) string {
	if applied > latest {
		return "a newer dotlab migrated it; upgrade this server"
	}
	return "restart this server so that it applies its migrations"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// observedSettler records each sweep in the metrics.
type observedSettler struct {
	s Settler
	m *metrics.Metrics
}

// Settle runs one sweep and records it (metrics.Metrics.ObserveSettle).
func (o observedSettler) Settle(ctx context.Context) (dotlab.SettleReport, error) {
	rep, err := o.s.Settle(ctx)
	o.m.ObserveSettle(rep, err)
	return rep, err
}
