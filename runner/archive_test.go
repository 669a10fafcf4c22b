package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/inputarchive"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/web"
)

// archiveWorld is a real server (SQLite, the API, the pages, an on-disk
// input archive) and a loopback data host serving a claim's dataset and
// code archive, which a test can stop and restart on the same address.
type archiveWorld struct {
	t          *testing.T
	api        *client.Client
	archiveDir string
	host       *httptest.Server
	addr       string
	files      map[string][]byte
}

func newArchiveWorld(t *testing.T) *archiveWorld {
	t.Helper()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	w := &archiveWorld{t: t, archiveDir: t.TempDir(), files: map[string][]byte{}}
	b, err := inputarchive.OpenDir(w.archiveDir)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := web.New(web.Config{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := servertest.API(t, httpapi.Config{Store: db, AllowPrivateURLs: true, Archive: inputarchive.New(b), Pages: pages})
	if w.api, err = client.New(srv.URL, ""); err != nil {
		t.Fatal(err)
	}
	return w
}

// serve (re)starts the data host on its address, serving files.
func (w *archiveWorld) serve(files map[string][]byte) {
	w.t.Helper()
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Write(data)
	})
	if w.addr == "" {
		w.host = httptest.NewServer(h)
		w.addr = w.host.Listener.Addr().String()
	} else {
		l, err := net.Listen("tcp", w.addr)
		if err != nil {
			w.t.Skipf("cannot listen again on %s: %v", w.addr, err)
		}
		w.host = &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
		w.host.Start()
	}
	w.t.Cleanup(w.host.Close)
}

func (w *archiveWorld) stop() { w.host.Close() }

func (w *archiveWorld) register(name string) *apiv1.AgentCreated {
	w.t.Helper()
	a, err := w.api.Register(context.Background(), dotlab.NewAgent{Name: name, Operator: "test"})
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *archiveWorld) blob(sum string) string { return filepath.Join(w.archiveDir, "sha256", sum) }

// TestArchiveOutlivesHost (docs/protocol.md "Input archive"): a claim is
// listed and run by a real runner (runc) against its data host, which
// uploads the verified dataset and code archive; once the host is stopped
// the claim reruns from the archive with the same outcome, logged and
// noted as such; a host that comes back serving other bytes is still
// input_mismatch (no fallback); a blob changed on the server's disk is
// refused by its hash at the runner; the canary marks the URL dead on the
// claim page.
func TestArchiveOutlivesHost(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	w := newArchiveWorld(t)
	code, codeSHA := tgz(t, [2]string{"run.sh", meanScript})
	codeBytes, _ := os.ReadFile(code)
	w.serve(map[string][]byte{"/data.csv": f.data, "/code.tar.gz": codeBytes})
	base := "http://" + w.addr
	m := f.manifest(base+"/data.csv", meanScript)
	m.Code = dotlab.Code{Archive: &dotlab.Archive{URL: base + "/code.tar.gz", SHA256: codeSHA}}
	raw, _ := json.Marshal(m)
	sub, run := w.register("submitter"), w.register("runner")
	claim, err := w.api.WithKey(sub.APIKey).SubmitClaim(ctx, raw, "statistics")
	if err != nil {
		t.Fatalf("listing: %v", err)
	}
	runnerAPI := w.api.WithKey(run.APIKey)
	a := &agent.Agent{Client: runnerAPI, Engine: f.r, WorkDir: t.TempDir(), Clock: dotlab.SystemClock{}}
	if id, err := a.RunOnce(ctx); err != nil || id != claim.ID {
		t.Fatalf("RunOnce: %q %v", id, err)
	}
	cv, _ := w.api.Claim(ctx, claim.ID)
	official, err := w.api.Run(ctx, cv.RunID)
	if err != nil || official.Body.Outcome != dotlab.OutcomeReproduced {
		t.Fatalf("official run: %+v %v", official, err)
	}
	for _, sum := range []string{f.dataSH, codeSHA} {
		if _, err := os.Stat(w.blob(sum)); err != nil {
			t.Fatalf("the runner did not archive %s: %v", sum, err)
		}
	}
	// The canary while the host serves: serving, by the runner.
	canary := &agent.Canary{Agent: a, HTTP: runner.LocalPolicy("/").Client()}
	if ok, err := canary.Claim(ctx, claim.ID); !ok || err != nil {
		t.Fatalf("canary: %v %v", ok, err)
	}
	reports, _ := w.api.Canary(ctx, claim.ID)
	if len(reports) != 2 || reports[0].Status != dotlab.CanaryServing || reports[1].Status != dotlab.CanaryServing {
		t.Fatalf("canary reports with the host up: %+v", reports)
	}

	w.stop()
	archive := runnerAPI.InputArchive(claim.ID)
	t.Run("host stopped: no outcome without the archive", func(t *testing.T) {
		_, err := f.fresh(t, runner.LocalPolicy("/")).Rerun(ctx, m, t.TempDir())
		if err == nil {
			t.Fatal("a rerun with the host stopped and no archive gave an outcome")
		}
	})
	t.Run("host stopped: rerun from the archive, outcome as before", func(t *testing.T) {
		out := t.TempDir()
		rec, err := f.fresh(t, runner.LocalPolicy("/")).Rerun(runner.WithInputArchive(ctx, archive), m, out)
		if err != nil || rec.Body.Outcome != official.Body.Outcome {
			t.Fatalf("rerun from the archive: %+v %v", rec, err)
		}
		if rec.Body.InputHashes["data"] != f.dataSH || rec.Body.Environment.CodeArchiveSHA256 != codeSHA {
			t.Fatalf("input hashes: %+v", rec.Body)
		}
		logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
		if !strings.Contains(rec.Body.Notes, "input archive") || strings.Count(string(logs), `"from_archive":true`) != 2 {
			t.Fatalf("the record does not say the inputs came from the archive: notes %q\n%s", rec.Body.Notes, logs)
		}
	})
	t.Run("the canary marks the URL dead on the claim page", func(t *testing.T) {
		other := &agent.Agent{Client: w.api.WithKey(sub.APIKey), Clock: dotlab.SystemClock{}}
		c := &agent.Canary{Agent: other, HTTP: runner.LocalPolicy("/").Client()}
		if ok, err := c.Claim(ctx, claim.ID); !ok || err != nil {
			t.Fatalf("canary: %v %v", ok, err)
		}
		res, err := http.Get(strings.TrimSuffix(w.api.LogsURL(claim.ID), "/api/v1/jobs/"+claim.ID+"/logs") + "/claims/" + claim.ID)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		row := `<tr data-url="` + base + `/data.csv"><th scope="row">data</th>`
		i := strings.Index(string(page), row)
		if res.StatusCode != 200 || i < 0 {
			t.Fatalf("claim page %d has no canary row for the dataset", res.StatusCode)
		}
		rest := string(page[i:])
		rest = rest[:strings.Index(rest, "</tr>")]
		if !strings.Contains(rest, `class="canary-dead"`) || !strings.Contains(rest, sub.ID) {
			t.Fatalf("the dataset's row does not show it dead, by %s: %s", sub.ID, rest)
		}
	})
	t.Run("a host serving other bytes is input_mismatch, no fallback", func(t *testing.T) {
		w.serve(map[string][]byte{"/data.csv": []byte("x\n9\n9\n"), "/code.tar.gz": codeBytes})
		defer w.stop()
		out := t.TempDir()
		rec, err := f.fresh(t, runner.LocalPolicy("/")).Rerun(runner.WithInputArchive(ctx, archive), m, out)
		if err != nil || rec.Body.Outcome != dotlab.OutcomeInputMismatch {
			t.Fatalf("other bytes: %+v %v", rec, err)
		}
		logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
		if strings.Contains(string(logs), "from_archive") {
			t.Fatalf("fell back to the archive on a mismatch:\n%s", logs)
		}
	})
	t.Run("a poisoned archive blob is refused by its hash", func(t *testing.T) {
		p := w.blob(f.dataSH)
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, []byte("x\n100\n100\n100\n100\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := f.fresh(t, runner.LocalPolicy("/")).Rerun(runner.WithInputArchive(ctx, archive), m, t.TempDir())
		if !errors.Is(err, runner.ErrArchiveRefused) {
			t.Fatalf("poisoned blob: %v", err)
		}
	})
}
