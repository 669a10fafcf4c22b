package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/sandbox"
)

// TestMain lets the bench binary be the download responder the sandbox
// re-executes (sandbox.ResponderArg).
func TestMain(m *testing.M) {
	sandbox.RunResponderIfAsked()
	os.Exit(m.Run())
}

// BenchmarkDownloadFreeRun measures what pinned downloads cost a run that
// has none, interleaved in each iteration: the dotlab sandbox running
// `true` with no downloads (no responder is started: the only new work is
// a length check and no proxy variables), bare `runc run` of the very
// config.json that run writes (the floor), and, to show what is skipped,
// the same run with one pinned download (responder process, CA and leaf
// certificates, netns join).
func BenchmarkDownloadFreeRun(b *testing.B) {
	s := prepare(b)
	rt := probedRuntime(b)
	code, data := b.TempDir(), b.TempDir()
	spec := sandbox.Spec{Rootfs: s.rootfs, CodeDir: code, DataDir: data, Args: []string{"true"}, ImageEnv: []string{imagestore.DefaultPath}}
	file := filepath.Join(b.TempDir(), "blob")
	os.WriteFile(file, []byte("x\n"), 0o444)
	withDL := spec
	withDL.Downloads = []sandbox.Download{{URL: "https://data.example.org/x.csv", File: file}}

	sameDir, sameOut := b.TempDir(), b.TempDir()
	os.Chmod(sameOut, 0o777)
	cfgJSON, _ := json.Marshal(sandbox.Config(spec, sameOut, "dlsame", false))
	os.WriteFile(filepath.Join(sameDir, "config.json"), cfgJSON, 0o644)
	b.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/dotlab/dlsame")
		for _, d := range dirs {
			os.Remove(filepath.Join(d, "ctr"))
			os.Remove(d)
		}
	})
	state := filepath.Join(b.TempDir(), "bare-state")
	var tFree, tSame, tWith time.Duration
	timeIt := func(acc *time.Duration, f func()) {
		start := time.Now()
		f()
		*acc += time.Since(start)
	}
	run := func(sp sandbox.Spec) {
		res, err := rt.Run(context.Background(), sp, b.TempDir(), sandbox.IO{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		timeIt(&tFree, func() { run(spec) })
		timeIt(&tSame, func() { runCmd(b, "runc", "--root", state, "run", "--bundle", sameDir, fmt.Sprintf("dlsame-%d", i)) })
		timeIt(&tWith, func() { run(withDL) })
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(tFree), "no-downloads-ms")
	b.ReportMetric(ms(tSame), "runc-same-config-ms")
	b.ReportMetric(ms(tWith), "one-download-ms")
	b.ReportMetric(ms(tFree)/ms(tSame), "x-runc-same")
	b.ReportMetric(ms(tWith)-ms(tFree), "responder-start-ms")
}

// BenchmarkDownload100MB measures a 100 MB pinned download served by the
// responder against reading the same cached file from /work/data, inside
// the same sandbox, interleaved in each iteration: busybox `cat` of the
// file, busybox `wget` of its pinned http:// URL through the proxy, and a
// run of `true` (the start-up both share). With the python-net example
// image in $DOTLAB_IMAGES_VAR (examples/images/net), also Python reading
// the file against urllib fetching its pinned http:// and https:// URLs
// (absolute-form GET; CONNECT and TLS). Reports each run, the transfer-only
// ratios (run minus the start-up run) and the whole-run ratios.
func BenchmarkDownload100MB(b *testing.B) {
	s := prepare(b)
	rt := probedRuntime(b)
	code, data := b.TempDir(), b.TempDir()
	big := make([]byte, 100<<20)
	rand.Read(big)
	file := filepath.Join(data, "big.bin")
	if err := os.WriteFile(file, big, 0o444); err != nil {
		b.Fatal(err)
	}
	dl := []sandbox.Download{{URL: "http://data.example.org/big.bin", File: file}, {URL: "https://data.example.org/big.bin", File: file}}
	spec := func(rootfs string, env []string, args ...string) sandbox.Spec {
		return sandbox.Spec{Rootfs: rootfs, CodeDir: code, DataDir: data, Args: args, ImageEnv: env, Downloads: dl,
			Limits: sandbox.Limits{TimeoutSeconds: 120, MemoryBytes: 1 << 30}}
	}
	path := []string{imagestore.DefaultPath}
	runs := map[string]sandbox.Spec{
		"true": spec(s.rootfs, path, "true"),
		"cat":  spec(s.rootfs, path, "sh", "-c", "cat /work/data/big.bin > /dev/null"),
		"wget": spec(s.rootfs, path, "sh", "-c", "wget -q -O /dev/null http://data.example.org/big.bin"),
	}
	if py := pythonNetRootfs(b); py != "" {
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		runs["py-true"] = spec(py, env, "python3", "-c", "pass")
		runs["py-file"] = spec(py, env, "python3", "-c", "open('/work/data/big.bin','rb').read()")
		runs["py-http"] = spec(py, env, "python3", "-c", "import urllib.request; urllib.request.urlopen('http://data.example.org/big.bin').read()")
		runs["py-https"] = spec(py, env, "python3", "-c", "import urllib.request; urllib.request.urlopen('https://data.example.org/big.bin').read()")
	}
	order := []string{"true", "cat", "wget", "py-true", "py-file", "py-http", "py-https"}
	total := map[string]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, name := range order {
			sp, ok := runs[name]
			if !ok {
				continue
			}
			var stderr bytes.Buffer
			start := time.Now()
			res, err := rt.Run(context.Background(), sp, b.TempDir(), sandbox.IO{Stderr: &stderr})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: %v exit %v: %s", name, err, res, stderr.String())
			}
			total[name] += time.Since(start)
			if name == "wget" || name == "py-http" || name == "py-https" {
				if n := served(res.Downloads); n != int64(len(big)) {
					b.Fatalf("%s: responder served %d bytes, want %d", name, n, len(big))
				}
			}
		}
	}
	b.StopTimer()
	ms := func(name string) float64 { return float64(total[name]) / float64(b.N) / 1e6 }
	b.ReportMetric(0, "ns/op")
	for _, name := range order {
		if _, ok := runs[name]; ok {
			b.ReportMetric(ms(name), name+"-ms")
		}
	}
	b.ReportMetric((ms("wget")-ms("true"))/(ms("cat")-ms("true")), "x-wget-vs-cat")
	b.ReportMetric(ms("wget")/ms("cat"), "x-wget-run-vs-cat-run")
	if _, ok := runs["py-https"]; ok {
		b.ReportMetric((ms("py-http")-ms("py-true"))/(ms("py-file")-ms("py-true")), "x-py-http-vs-file")
		b.ReportMetric((ms("py-https")-ms("py-true"))/(ms("py-file")-ms("py-true")), "x-py-https-vs-file")
		b.ReportMetric(ms("py-https")/ms("py-file"), "x-py-https-run-vs-file-run")
	}
}

// served sums the bytes of the requests the responder served.
func served(events []sandbox.ResponderEvent) int64 {
	var n int64
	for _, e := range events {
		if e.Refused == "" {
			n += e.Bytes
		}
	}
	return n
}

// pythonNetRootfs is the unpacked rootfs of the python-net example image
// (examples/images/net/build.sh python) in $DOTLAB_IMAGES_VAR, or "".
func pythonNetRootfs(b *testing.B) string {
	dir := os.Getenv("DOTLAB_IMAGES_VAR")
	if dir == "" {
		return ""
	}
	packed, err := os.ReadFile(filepath.Join(dir, "images", "python-net.packed"))
	if err != nil {
		b.Logf("no python-net image in %s (examples/images/net/build.sh python): https not measured", dir)
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(packed)), "\n")
	digest, _, _ := strings.Cut(lines[len(lines)-1], "\t")
	store, err := imagestore.Open(filepath.Join(dir, "cache", "images"))
	if err != nil {
		b.Fatal(err)
	}
	d, err := imagestore.ParseDigest(digest)
	if err != nil {
		b.Fatal(err)
	}
	img, err := store.Image(d)
	if err != nil {
		b.Fatal(err)
	}
	rootfs, err := store.Rootfs(img, nil)
	if err != nil {
		b.Fatal(err)
	}
	testfix.Need(b, true)
	return rootfs
}
