// Package metrics is DotLab's Prometheus instrumentation, on
// prometheus/client_golang: one registry per server (never the library's
// global default registry) holding the Go runtime and process collectors and
// DotLab's own series, served in the Prometheus text format by Handler
// (GET /metrics of `dotlab serve`; docs/deploy.md "Metrics" lists every
// series).
//
// Requests are counted by route, and a route is the ServeMux pattern that
// served the request ("GET /api/v1/claims/{id}"), never the raw path, so that
// the number of series stays bounded whatever paths clients send.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/dotlab/dotlab"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config says what a Metrics observes.
type Config struct {
	// Clock times requests (default dotlab.SystemClock).
	Clock dotlab.Clock
	// Version is reported as dotlab_build_info{version}.
	Version string
	// Subscribers reports the live event streams open now (the gauge
	// dotlab_sse_subscribers); nil reports 0.
	Subscribers func() int64
	// DrawRoute is the route pattern whose requests draw a job ("GET
	// /api/v1/jobs/next"); they are also timed in dotlab_job_draw_seconds.
	DrawRoute string
}

// Metrics is one server's registry and its series. It is safe for
// concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	clock     dotlab.Clock
	drawRoute string

	requests  *prometheus.CounterVec   // dotlab_http_requests_total{route,code}
	duration  *prometheus.HistogramVec // dotlab_http_request_duration_seconds{route}
	draw      *prometheus.HistogramVec // dotlab_job_draw_seconds{result}
	settleLag *prometheus.HistogramVec // dotlab_settlement_lag_seconds{event}
	sweeps    *prometheus.CounterVec   // dotlab_settlement_sweeps_total{result}
}

// latencyBuckets are 0.5 ms … 16 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// lagBuckets are 50 ms … about 1.8 h, doubling: a sweep runs every
// --settle-every (1 s by default), so a healthy lag stays in the first few.
var lagBuckets = prometheus.ExponentialBuckets(0.05, 2, 18)

// New returns a Metrics with its own registry.
func New(cfg Config) *Metrics {
	if cfg.Clock == nil {
		cfg.Clock = dotlab.SystemClock{}
	}
	m := &Metrics{reg: prometheus.NewRegistry(), clock: cfg.Clock, drawRoute: cfg.DrawRoute,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dotlab_http_requests_total",
			Help: "HTTP requests answered, by route (the ServeMux pattern that served them) and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dotlab_http_request_duration_seconds",
			Help:    "Time from a request's arrival until its handler returned, by route; for an event stream, how long the stream stayed open.",
			Buckets: latencyBuckets}, []string{"route"}),
		draw: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dotlab_job_draw_seconds",
			Help:    "Time to answer a job draw (GET /api/v1/jobs/next), by result: offered (200), none (204) or failed (any other status).",
			Buckets: latencyBuckets}, []string{"result"}),
		settleLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dotlab_settlement_lag_seconds",
			Help:    "How late the settlement clock applied a change after its deadline, by event: expire (offer), abandon (publish deadline), window_close (challenge window).",
			Buckets: lagBuckets}, []string{"event"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dotlab_settlement_sweeps_total",
			Help: "Settlement sweeps run by this server, by result: ok or failed."}, []string{"result"}),
	}
	subs := cfg.Subscribers
	if subs == nil {
		subs = func() int64 { return 0 }
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dotlab_build_info", Help: "Always 1; the version label is the server's build."}, []string{"version"})
	build.WithLabelValues(cfg.Version).Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration, m.draw, m.settleLag, m.sweeps, build,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dotlab_sse_subscribers",
			Help: "Live event streams (GET /api/v1/labs/{id}/events) open on this server now."},
			func() float64 { return float64(subs()) }),
	)
	for _, r := range []string{"offered", "none", "failed"} {
		m.draw.WithLabelValues(r) // present from the start, at zero
	}
	for _, e := range []dotlab.Event{dotlab.EventExpire, dotlab.EventAbandon, dotlab.EventWindowClose} {
		m.settleLag.WithLabelValues(string(e))
	}
	m.sweeps.WithLabelValues("ok")
	m.sweeps.WithLabelValues("failed")
	return m
}

// Registry is the server's own registry (for collectors a caller adds).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text exposition format
// (or OpenMetrics when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// ObserveSettle records one settlement sweep: its result and, for each
// change it applied, how late (dotlab.SettleReport.Lags).
func (m *Metrics) ObserveSettle(rep dotlab.SettleReport, err error) {
	if err != nil {
		m.sweeps.WithLabelValues("failed").Inc()
	} else {
		m.sweeps.WithLabelValues("ok").Inc()
	}
	for _, l := range rep.Lags {
		m.settleLag.WithLabelValues(string(l.Event)).Observe(l.Late.Seconds())
	}
}

// Instrument counts and times every request next serves. The route label
// is the pattern of the innermost ServeMux that served the request
// (http.Request.Pattern, which a ServeMux sets on the request it is given);
// when no mux below the outermost one matched the request — a request
// answered before routing, such as a 429 from the rate limit — route(r)
// names it instead (the pattern the request would have been routed to).
// Either way the label is a pattern, never the raw path.
func (m *Metrics) Instrument(next http.Handler, route func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := m.clock.Now()
		sw := &statusWriter{ResponseWriter: w}
		r.Pattern = ""
		next.ServeHTTP(sw, r)
		pattern := r.Pattern
		if pattern == "" || pattern == "/" {
			pattern = route(r)
		}
		code := sw.status
		if code == 0 {
			code = http.StatusOK
		}
		took := m.clock.Now().Sub(start).Seconds()
		m.requests.WithLabelValues(pattern, codeText(code)).Inc()
		m.duration.WithLabelValues(pattern).Observe(took)
		if pattern == m.drawRoute && m.drawRoute != "" {
			m.draw.WithLabelValues(drawResult(code)).Observe(took)
		}
	})
}

// codes are the status codes' label values, made once.
var codes = func() (c [600]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

func codeText(code int) string {
	if code >= 0 && code < len(codes) {
		return codes[code]
	}
	return strconv.Itoa(code)
}

func drawResult(code int) string {
	switch code {
	case http.StatusOK:
		return "offered"
	case http.StatusNoContent:
		return "none"
	}
	return "failed"
}

// statusWriter records the status a handler wrote. It passes Flush on (the
// event streams need it) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx answers are not the status
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client (http.Flusher).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap returns the underlying writer (http.ResponseController).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
