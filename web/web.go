// Package web serves DotLab's public pages: the front page, claims, runs,
// lab rooms (live at /labs/{claim id}), agent profiles (/agents/{agent id})
// and the documentation (docs/protocol.md §9 "The public pages"). Pages are rendered on the server with html/template
// from embedded templates and assets: no build step, no external fonts or
// scripts, readable without JavaScript. Scripts only add live lab updates
// (EventSource on /api/v1/labs/{id}/events) and show times in the reader's
// time zone.
//
// Every page's data is also JSON from the API: each page links its API
// resource (<link rel="alternate" type="application/json">), and
// httpapi.Server answers a page URL requested with Accept: application/json
// from the API route.
package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/translog"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Store is what the pages read (sqlstore.DB implements it).
type Store interface {
	FindClaim(ctx context.Context, id string) (*dotlab.Claim, error)
	FindClaims(ctx context.Context, f dotlab.Page) ([]*dotlab.Claim, error)
	ClaimEvents(ctx context.Context, claimID string, after int64) ([]dotlab.ClaimEvent, error)
	FindRun(ctx context.Context, id string) (*dotlab.Run, error)
	FindChallenges(ctx context.Context, claimID string) ([]*dotlab.Challenge, error)
	FindDispute(ctx context.Context, claimID string) (*dotlab.Dispute, error)
	JobLogs(ctx context.Context, claimID string) ([]byte, error)
	LabMembers(ctx context.Context, claimID string) ([]dotlab.LabMember, error)
	LabMessages(ctx context.Context, claimID string, after int64, limit int) ([]dotlab.LabMessage, error)
	LabLatest(ctx context.Context, claimID string) (msg, ev int64, err error)
	FindAgent(ctx context.Context, id string) (*dotlab.AgentProfile, error)
	// LatestSettled returns the limit (1-50) latest settled claims with
	// their manifests, newest settled first (the Atom feed).
	LatestSettled(ctx context.Context, limit int) ([]*dotlab.Claim, error)
	// LatestCanaryReports is the latest canary report on each pinned URL
	// of claimID, by URL (the claim page's "Do the inputs still serve?").
	LatestCanaryReports(ctx context.Context, claimID string) ([]dotlab.CanaryReport, error)
	dotlab.SummaryService
	dotlab.ActivityService
}

// Config configures the pages.
type Config struct {
	Store  Store
	Clock  dotlab.Clock // default dotlab.SystemClock
	Logger *slog.Logger // default discards
	// Windows are shown on the front page (default dotlab.DefaultWindows).
	Windows dotlab.Windows
	// Log is the transparency log whose entries the claim and run pages
	// cite; nil shows none.
	Log *translog.Log
	// PublicURL is where readers reach the pages, scheme and host only
	// ("https://dotlab.example.org"): the absolute links of the feed,
	// badges' markdown, JSON-LD and citations. Empty leaves them relative to
	// the document they are read from (travel.go).
	PublicURL string
}

// Handler serves the pages; mount it at "/" beside the API
// (httpapi.Config.Pages).
type Handler struct {
	store   Store
	clock   dotlab.Clock
	logger  *slog.Logger
	windows dotlab.Windows
	mux     *http.ServeMux
	pages   map[string]*template.Template
	docs    *docSet
	assets  http.Handler
	assetFS fs.FS
	version string // asset fingerprint, for cache busting
	log     *translog.Log
	// publicURL is Config.PublicURL without a trailing slash ("" when none).
	publicURL string
}

// New parses the templates and renders the docs once.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("web: Config.Store is required")
	}
	h := &Handler{store: cfg.Store, clock: cfg.Clock, logger: cfg.Logger, windows: cfg.Windows, mux: http.NewServeMux(), log: cfg.Log}
	var err error
	if h.publicURL, err = checkPublicURL(cfg.PublicURL); err != nil {
		return nil, err
	}
	if h.clock == nil {
		h.clock = dotlab.SystemClock{}
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.windows == (dotlab.Windows{}) {
		h.windows = dotlab.DefaultWindows
	}
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	h.version, err = fingerprint(sub)
	if err != nil {
		return nil, err
	}
	h.assetFS = sub
	h.assets = http.StripPrefix("/assets/", http.FileServerFS(sub))
	if h.docs, err = loadDocs(); err != nil {
		return nil, err
	}
	if h.pages, err = parseTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// ServeHTTP sets the pages' security headers and routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Scripts, styles and connections from this origin only: a claim's
	// text can never load or run anything (docs/threat-model.md).
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// notFound answers 405 (with Allow) for another method on a page that
// exists, and 404 no_such_route otherwise.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		probe := r.Clone(r.Context())
		probe.Method = http.MethodGet
		if _, pattern := h.mux.Handler(probe); pattern != "/" {
			w.Header().Set("Allow", "GET, HEAD")
			return dotlab.Errorf(apiv1.EMETHODNOTALLOWED, "%s is not allowed on this page: use GET (the API is under /api/v1)", r.Method)
		}
	}
	return dotlab.Errorf(dotlab.ENOSUCHROUTE, "there is no page at %s: see / for the claims and /docs for the documentation", r.URL.Path)
}

// asset serves an embedded file; directories and missing files get the
// 404 page, and only a fingerprinted hit is cached for good.
func (h *Handler) asset(w http.ResponseWriter, r *http.Request) error {
	name := strings.TrimPrefix(r.URL.Path, "/assets/")
	if st, err := fs.Stat(h.assetFS, name); err != nil || st.IsDir() || !fs.ValidPath(name) {
		return dotlab.Errorf(dotlab.ENOTFOUND, "there is no asset %q", name)
	}
	if r.URL.Query().Get("v") == h.version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=300")
	}
	h.assets.ServeHTTP(w, r)
	return nil
}

// page is what every template receives.
type page struct {
	Title   string
	Path    string // for the navigation's aria-current
	JSON    string // the API resource with the same data
	Assets  string // asset fingerprint
	Now     time.Time
	Data    any
	Status  int
	Message string
}

// render executes the named page template into a buffer first, so a
// template error never sends half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, status int, p page) {
	t, ok := h.pages[name]
	if !ok {
		h.logger.Error("web: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	p.Path, p.Assets, p.Now = r.URL.Path, h.version, h.clock.Now()
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		h.logger.Error("web: render", "page", name, "path", r.URL.Path, "err", err)
		if name != "error" {
			h.render(w, r, "error", http.StatusInternalServerError, page{Title: "Internal error", Status: 500, Message: "The page could not be rendered. The error is logged; please try again later."})
			return
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Vary", "Accept")
	if p.JSON != "" {
		w.Header().Set("Link", "<"+p.JSON+`>; rel="alternate"; type="application/json"`)
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// handlerFunc is a page handler in the shape of httpapi's (and
// golang/pkgsite's): it renders its page, or returns an error that the
// adapter (Handler.handle) renders as the error page. A handler returns an
// error only before it has written anything.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts f to http.HandlerFunc: the one place an error page is
// written.
func (h *Handler) handle(f handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			h.writeError(w, r, err)
		}
	}
}

// writeError renders an error page with the status of the error's code (the
// API's table, apiv1.ErrorStatus; docs/protocol.md §5). Internal errors are
// logged and shown without their text.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := dotlab.ErrorCode(err)
	status := apiv1.ErrorStatus(code)
	msg := ""
	if code == dotlab.EINTERNAL || status >= 500 {
		if !errors.Is(err, context.Canceled) {
			h.logger.Error("web: page failed", "path", r.URL.Path, "err", err)
		}
		msg = "Something went wrong on our side. The error is logged; please try again later."
	} else {
		msg = strings.Join(dotlab.ErrorDetail(err), "; ")
	}
	h.render(w, r, "error", status, page{Title: http.StatusText(status), Status: status, Message: msg})
}
