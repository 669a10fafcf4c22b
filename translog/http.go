package translog

import (
	"compress/gzip"
	"net/http"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/tlogfmt"
)

// Prefix is where the log's c2sp.org/tlog-tiles resources are served:
// <Prefix>checkpoint, <Prefix>tile/<L>/<N>[.p/<W>] and
// <Prefix>tile/entries/<N>[.p/<W>].
const Prefix = "/log/"

// Cache-Control of the resources: the checkpoint changes with every
// append; full tiles and bundles never change; a partial tile's content
// never changes either, but it is superseded by its full tile.
const (
	checkpointCache = "no-cache"
	fullTileCache   = "public, max-age=31536000, immutable"
	partialCache    = "public, max-age=300"
)

// Route is one HTTP route of the log: a net/http ServeMux pattern and a
// handler that returns its error for the server's error adapter to write
// (httpapi writes {"error","detail"} with apiv1's status table).
type Route struct {
	Pattern string
	Handle  func(http.ResponseWriter, *http.Request) error
}

// Routes are the log's c2sp.org/tlog-tiles routes under Prefix
// (docs/verification.md "Served resources").
func (l *Log) Routes() []Route {
	return []Route{
		{"GET " + Prefix + "checkpoint", l.serveCheckpoint},
		{"GET " + Prefix + "tile/", l.serveTile},
	}
}

// serveCheckpoint writes the current signed checkpoint, with the
// cosignatures witnesses made of it (Witnessed.Note), as text/plain.
func (l *Log) serveCheckpoint(w http.ResponseWriter, r *http.Request) error {
	wit, err := l.Witnessed(r.Context())
	if err != nil {
		return err
	}
	signed := wit.Note
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", checkpointCache)
	_, err = w.Write(signed)
	return err
}

// serveTile writes a hash tile or an entry bundle as
// application/octet-stream; a bundle is gzip-compressed when the client
// accepts gzip.
func (l *Log) serveTile(w http.ResponseWriter, r *http.Request) error {
	t, err := tlogfmt.ParseTilePath(strings.TrimPrefix(r.URL.Path, Prefix))
	if err != nil {
		return notFound(r, err)
	}
	data, err := l.TileData(r.Context(), t)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	if t.W == tlogfmt.TileWidth {
		h.Set("Cache-Control", fullTileCache)
	} else {
		h.Set("Cache-Control", partialCache)
	}
	if t.Level != tlogfmt.EntriesLevel {
		_, err = w.Write(data)
		return err
	}
	h.Set("Vary", "Accept-Encoding")
	if !acceptsGzip(r) {
		_, err = w.Write(data)
		return err
	}
	h.Set("Content-Encoding", "gzip")
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	return zw.Close()
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}

// notFound is ENOTFOUND for a path that names no log resource, saying why.
func notFound(r *http.Request, err error) error {
	return dotlab.Errorf(dotlab.ENOTFOUND, "%s: %v", r.URL.Path, err)
}
