package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
)

// TestMain makes this test binary the download responder the sandbox
// re-executes, and has this process trust the loopback https origin's
// certificate (httptest's, the same for every TLS server it starts), so
// that the runner fetches pinned https URLs from it as from any server.
func TestMain(m *testing.M) {
	sandbox.RunResponderIfAsked()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	ca := filepath.Join(os.TempDir(), fmt.Sprintf("dotlab-origin-%d.pem", os.Getpid()))
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	srv.Close()
	os.Setenv("SSL_CERT_FILE", ca)
	code := m.Run()
	os.Remove(ca)
	os.Exit(code)
}

// origin is a loopback https server that serves files by path and counts
// what it is asked for.
type origin struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func newOrigin(t *testing.T, files map[string][]byte) *origin {
	o := &origin{files: files}
	o.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		body, ok := o.files[r.URL.Path]
		o.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) set(path string, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.files[path] = body
}

// canary is a listener on 127.0.0.2, another loopback address of the host,
// that the analysis tries to reach directly and through the proxy: it must
// receive nothing (the sandbox has no route to the host's loopback, let
// alone off the machine).
type canary struct {
	ln       net.Listener
	accepted atomic.Int64
}

func newCanary(t *testing.T) *canary {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("canary on 127.0.0.2: %v", err)
	}
	c := &canary{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *canary) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// downloadRunner is a runner on the example images' store, with the fetch
// policy that admits the loopback origin.
func downloadRunner(t *testing.T, runtime, varDir string) *runner.Runner {
	t.Helper()
	r, err := runner.New(t.TempDir(), sandbox.Runtime{Name: runtime, StateDir: filepath.Join(t.TempDir(), "state"), BundleDir: t.TempDir()},
		runner.LocalPolicy(os.TempDir()), dotlab.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Store, err = runner.OpenImageStore(filepath.Join(varDir, "cache")); err != nil {
		t.Fatal(err)
	}
	return r
}

// downloadManifest is a v0.2 manifest of code (one file, committed into a
// repository) run by entrypoint in image, with downloads and targets.
func downloadManifest(t *testing.T, image, file, code string, entrypoint []string, downloads []dotlab.Download, targets string) *dotlab.Manifest {
	t.Helper()
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, file), []byte(code), 0o644)
	repo := filepath.Join(t.TempDir(), "repo")
	commit := exampleRepo(t, src, repo)
	m := fmt.Sprintf(`{"spec_version": "0.2", "title": "pinned downloads", "source": {"citation": "A test of pinned downloads", "url": "https://example.org/paper"},
 "datasets": [], "code": {"repository": "https://example.org/repo.git", "commit": %q},
 "environment": {"image": %q}, "entrypoint": %s, "targets": %s, "limits": {"timeout_seconds": 300, "memory_mb": 1024}}`,
		commit, image, jsonText(entrypoint), targets)
	parsed, err := manifest.Parse([]byte(m))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	parsed.Downloads = downloads
	if err := manifest.Check(parsed); err != nil {
		t.Fatalf("manifest with downloads: %v", err)
	}
	parsed.Code.Repository = repo
	return parsed
}

// rerun runs m and checks that the server would accept the record and
// that its logs cover it.
func rerun(t *testing.T, r *runner.Runner, m *dotlab.Manifest) (*runner.Record, string) {
	t.Helper()
	out := t.TempDir()
	rec, err := r.Rerun(context.Background(), m, out)
	if err != nil {
		t.Fatalf("no outcome: %v", err)
	}
	if _, err := dotlab.EvaluateRun(m, &rec.Body); err != nil {
		t.Errorf("the server would reject run.json: %v", err)
	}
	logs, _ := os.ReadFile(filepath.Join(out, runner.LogsFile))
	if c := dotlab.CheckLogCoverage(m, &rec.Body, logs); !c.Complete {
		t.Errorf("log coverage incomplete: %+v", c)
	}
	return rec, string(logs)
}

const pythonDownloads = `import json, socket, urllib.request, urllib.error, requests
base = "https://127.0.0.1:%[1]d"
rows = requests.get(base + "/data/table.csv", timeout=30).text.strip().splitlines()[1:]
total = sum(float(r.split(",")[1]) for r in rows)
words = urllib.request.urlopen(base + "/data/words.txt?v=2", timeout=30).read().decode().split()
print("undeclared", requests.get(base + "/data/undeclared.csv", timeout=30).status_code)
print("post", requests.post(base + "/data/table.csv", data={"x": "1"}, timeout=30).status_code)
try:
    requests.get("https://elsewhere.example.net/x.csv", timeout=30)
except requests.exceptions.ProxyError as e:
    print("other host refused")
try:
    socket.create_connection(("127.0.0.2", %[2]d), timeout=3)
    print("canary reached directly")
except OSError as e:
    print("canary unreachable:", e)
print("canary via proxy", requests.get("http://127.0.0.2:%[2]d/", timeout=30).status_code)
json.dump({"total": total, "words": len(words)}, open("/work/out/results.json", "w"))
`

// TestPinnedDownloadsPython reruns a Python script that fetches a CSV with
// requests and a text file with urllib over https, in the python-net image
// (python plus python3-requests, examples/images/net), with runc and
// runsc: reproduced from the manifest's downloads; an undeclared URL, a
// POST and another host refused, each with a log line naming it; a canary
// listener on another loopback address of the host receives nothing; and
// one changed byte at the origin is input_mismatch with nothing executed.
func TestPinnedDownloadsPython(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "runsc", "chroot", "go")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the python-net image (-short)")
	}
	varDir := imagesVar(t)
	ref := buildNetRecipe(t, dotlabBinary(t), varDir, "python")
	table, words := []byte("k,v\na,1.5\nb,2.25\nc,3\n"), []byte("one two three four\n")
	o := newOrigin(t, map[string][]byte{"/data/table.csv": table, "/data/words.txt": words})
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			c := newCanary(t)
			m := downloadManifest(t, ref, "fetch.py", fmt.Sprintf(pythonDownloads, o.Listener.Addr().(*net.TCPAddr).Port, c.port()),
				[]string{"python3", "fetch.py"},
				[]dotlab.Download{{Name: "table", URL: o.URL + "/data/table.csv", SHA256: sum(table)}, {Name: "words", URL: o.URL + "/data/words.txt?v=2", SHA256: sum(words)}},
				`[{"name": "total", "value": 6.75, "tolerance": {"type": "absolute", "value": 0}}, {"name": "words", "value": 4, "tolerance": {"type": "absolute", "value": 0}}]`)
			rec, logs := rerun(t, downloadRunner(t, runtime, varDir), m)
			if rec.Body.Outcome != dotlab.OutcomeReproduced {
				t.Fatalf("outcome %s, want reproduced; notes: %s\n%s", rec.Body.Outcome, rec.Body.Notes, logs)
			}
			if rec.Body.InputHashes["download:table"] != sum(table) || rec.Body.InputHashes["download:words"] != sum(words) {
				t.Errorf("input_hashes %v lack the downloads", rec.Body.InputHashes)
			}
			for _, want := range []string{
				`"refused GET ` + o.URL + `/data/undeclared.csv (not pinned)`,
				`"refused POST ` + o.URL + `/data/table.csv (method)`,
				`"refused CONNECT https://elsewhere.example.net:443/ (host)`,
				`"refused GET http://127.0.0.2:` + fmt.Sprint(c.port()) + `/ (not pinned)`,
				`"served GET ` + o.URL + `/data/words.txt?v=2 from its pinned download"`,
				"undeclared 403", "post 405", "other host refused", "canary unreachable", "canary via proxy 403",
			} {
				if !strings.Contains(logs, want) {
					t.Errorf("logs.jsonl lacks %q", want)
				}
			}
			if n := c.accepted.Load(); n != 0 {
				t.Errorf("the canary on 127.0.0.2 accepted %d connections", n)
			}
			t.Run("changed byte", func(t *testing.T) {
				changed := bytes.Clone(table)
				changed[len(changed)-2] = '4'
				o.set("/data/table.csv", changed)
				defer o.set("/data/table.csv", table)
				rec, logs := rerun(t, downloadRunner(t, runtime, varDir), m)
				if rec.Body.Outcome != dotlab.OutcomeInputMismatch || !strings.Contains(rec.Body.Notes, "download table: expected sha256 "+sum(table)+", got "+sum(changed)) {
					t.Errorf("outcome %s, notes %q; want input_mismatch naming download table", rec.Body.Outcome, rec.Body.Notes)
				}
				if strings.Contains(logs, `"step":"execute"`) {
					t.Errorf("the entrypoint ran despite the mismatch")
				}
			})
		})
	}
}

const rDownloads = `base <- "https://127.0.0.1:%d"
res <- httr::GET(paste0(base, "/R/helpers.R"), httr::write_disk(file.path(tempdir(), "helpers.R"), overwrite = TRUE))
httr::stop_for_status(res)
source(file.path(tempdir(), "helpers.R"))
download.file(paste0(base, "/data/trial.csv"), file.path(tempdir(), "trial.csv"), quiet = TRUE)
d <- read.csv(file.path(tempdir(), "trial.csv"))
cat(sprintf('{"weighted_mean": %%s}\n', format(weighted_effect(d), digits = 15)), file = "/work/out/results.json")
`

// TestPinnedDownloadsR reruns an R script that source()s an R file fetched
// with httr::GET(..., write_disk()) and reads a CSV fetched with
// download.file, both over https, in the r-net image (r plus r-cran-httr),
// with runc and runsc: reproduced from the manifest's downloads.
func TestPinnedDownloadsR(t *testing.T) {
	testfix.Need(t, true, "debootstrap", "runc", "runsc", "chroot", "go")
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the r-net image (-short)")
	}
	varDir := imagesVar(t)
	ref := buildNetRecipe(t, dotlabBinary(t), varDir, "r")
	helpers := []byte("weighted_effect <- function(d) sum(d$effect * d$n) / sum(d$n)\n")
	trial := []byte("effect,n\n0.5,10\n0.25,30\n1,10\n")
	o := newOrigin(t, map[string][]byte{"/R/helpers.R": helpers, "/data/trial.csv": trial})
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			m := downloadManifest(t, ref, "analysis.R", fmt.Sprintf(rDownloads, o.Listener.Addr().(*net.TCPAddr).Port),
				[]string{"Rscript", "analysis.R"},
				[]dotlab.Download{{Name: "helpers", URL: o.URL + "/R/helpers.R", SHA256: sum(helpers)}, {Name: "trial", URL: o.URL + "/data/trial.csv", SHA256: sum(trial)}},
				`[{"name": "weighted_mean", "value": 0.45, "tolerance": {"type": "absolute", "value": 1e-12}}]`)
			rec, logs := rerun(t, downloadRunner(t, runtime, varDir), m)
			if rec.Body.Outcome != dotlab.OutcomeReproduced {
				t.Fatalf("outcome %s, want reproduced; notes: %s\n%s", rec.Body.Outcome, rec.Body.Notes, logs)
			}
			for _, want := range []string{`"served GET ` + o.URL + `/R/helpers.R from its pinned download"`, `"served GET ` + o.URL + `/data/trial.csv from its pinned download"`} {
				if !strings.Contains(logs, want) {
					t.Errorf("logs.jsonl lacks %q", want)
				}
			}
		})
	}
}

// buildNetRecipe runs examples/images/net/build.sh BASE (cached in varDir)
// and returns the reference it printed.
func buildNetRecipe(t *testing.T, bin, varDir, base string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("net", "build.sh"), base, bin, varDir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("net/build.sh %s: %v\n%s", base, err, tail(stderr.String(), 4000))
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 || !strings.Contains(fields[len(fields)-1], "@sha256:") {
		t.Fatalf("net/build.sh %s printed %q", base, out)
	}
	return fields[len(fields)-1]
}
