package httpapi

import (
	"fmt"
	"math/rand/v2"
	"net/http"
)

// What the operations side of a server (server package: /metrics, the
// drain on SIGTERM; docs/deploy.md) reads from the API.

// Pattern returns the route pattern r is served by ("GET
// /api/v1/claims/{id}", "/" for the public pages), never its raw path: the
// route label of the request metrics.
func (s *Server) Pattern(r *http.Request) string {
	_, p := s.mux.Handler(r)
	return p
}

// Streams returns how many live event streams (GET /labs/{id}/events) are
// open now.
func (s *Server) Streams() int64 { return s.streams.Load() }

// Reconnect delays sent when the server closes a live stream to shut down
// (Close): a retry field between closeRetryMin and closeRetryMin +
// closeRetrySpread milliseconds, drawn per stream so that thousands of
// EventSources do not all reconnect in the same instant.
const (
	closeRetryMin    = 100
	closeRetrySpread = 900
)

// closing ends a stream because the server is shutting down: a retry field
// tells the EventSource to reconnect soon (through the balancer, to
// another server) instead of after its usual delay; it resumes with
// Last-Event-ID, losing nothing (docs/protocol.md §9, docs/deploy.md
// "Draining").
func (st *stream) closing() {
	fmt.Fprintf(st.w, "retry: %d\n\n", closeRetryMin+rand.IntN(closeRetrySpread))
	st.fl.Flush()
}
