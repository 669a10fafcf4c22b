package oapiclient_test

import (
	"bytes"
	"context"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/oapiclient"
	"github.com/dotlab/dotlab/internal/testing/oapidoc"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/spec"
	"github.com/dotlab/dotlab/sqlstore"
)

// checkedDoer sends the generated client's requests and holds every answer
// to spec/openapi.yaml: the operation exists, the status is declared for
// it, and a JSON body is valid under the declared schema. It records which
// operations answered which statuses.
type checkedDoer struct {
	t   *testing.T
	doc *oapidoc.Doc
	hc  *http.Client

	mu   sync.Mutex
	seen map[string]map[int]bool // operationId → statuses
}

func newCheckedDoer(t *testing.T) *checkedDoer {
	doc, err := oapidoc.Load(spec.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	return &checkedDoer{t: t, doc: doc, hc: &http.Client{Timeout: time.Minute}, seen: map[string]map[int]bool{}}
}

func (d *checkedDoer) Do(req *http.Request) (*http.Response, error) {
	res, err := d.hc.Do(req)
	if err != nil {
		return nil, err
	}
	path, ok := strings.CutPrefix(req.URL.Path, "/api/v1")
	op, found := d.doc.Match(req.Method, path)
	if !ok || !found {
		d.t.Errorf("the generated client called %s %s, which is no operation of spec/openapi.yaml", req.Method, req.URL.Path)
		return res, nil
	}
	d.mu.Lock()
	if d.seen[op.ID] == nil {
		d.seen[op.ID] = map[int]bool{}
	}
	d.seen[op.ID][res.StatusCode] = true
	d.mu.Unlock()
	ct := res.Header.Get("Content-Type")
	var body []byte
	if strings.HasPrefix(ct, "application/json") || res.StatusCode == http.StatusNoContent {
		body, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err := d.doc.ValidateResponse(op, res.StatusCode, ct, body); err != nil {
		d.t.Errorf("%s %s: %v\nbody: %.2000s", req.Method, req.URL, err, body)
	}
	return res, nil
}

// uncalled returns the document's operations no request reached.
func (d *checkedDoer) uncalled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, op := range d.doc.Operations() {
		if len(d.seen[op.ID]) == 0 {
			out = append(out, op.ID)
		}
	}
	return out
}

// startServer runs the real server (server.Run: the store on a SQLite
// file, the secret screen, the pages, the API and the settlement clock) on
// a loopback port until the test ends, and returns the API's base URL.
// The default windows and quorum apply: the dispute settles by its third
// vote, so no window has to pass. It serves plain http on loopback, a
// private deployment, so it takes private URLs (logs_uri) as
// --allow-private-urls does.
func startServer(t *testing.T) string {
	t.Helper()
	return servertest.Start(t, server.Config{DB: sqlstoretest.URL(t, sqlstore.SQLite), Windows: dotlab.DefaultWindows,
		SettleEvery: time.Second, Version: "oapiclient-test", AllowPrivateURLs: true,
		ArchiveDir: t.TempDir(), Archive: protocol.DefaultArchiveLimits()}) + "/api/v1"
}

// agent is a registered agent and a generated client sending its key.
type agent struct {
	id, key string
	c       *oapiclient.ClientWithResponses
}

func newClient(t *testing.T, base string, doer *checkedDoer, key string) *oapiclient.ClientWithResponses {
	t.Helper()
	opts := []oapiclient.ClientOption{oapiclient.WithHTTPClient(doer)}
	if key != "" {
		opts = append(opts, oapiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	}
	c, err := oapiclient.NewClientWithResponses(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// status fails the test unless r answered want.
func status(t *testing.T, what string, r interface{ StatusCode() int }, body []byte, want int) {
	t.Helper()
	if r.StatusCode() != want {
		t.Fatalf("%s: %d, want %d: %s", what, r.StatusCode(), want, body)
	}
}
