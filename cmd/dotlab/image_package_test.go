package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab/imagebuild"
	"github.com/dotlab/dotlab/internal/testing/debrepotest"
	"github.com/dotlab/dotlab/internal/testing/registrytest"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/internal/testing/testimage"
	"github.com/dotlab/dotlab/runner"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// helloRepo serves a loopback apt repository with dotlab-hello (a command
// printing the rerun's result) and the data package it depends on.
func helloRepo(t *testing.T) *debrepotest.Repo {
	return debrepotest.Serve(t,
		debrepotest.Deb{Name: "dotlab-hello", Version: "1.0", Depends: "dotlab-hello-data (= 1.0)",
			Files: map[string]string{"usr/bin/dotlab-hello": "#!/bin/sh\nprintf '{\"total\": %s}\\n' \"$(cat /usr/share/dotlab-hello/total)\"\n"}},
		debrepotest.Deb{Name: "dotlab-hello-data", Version: "1.0", Files: map[string]string{"usr/share/dotlab-hello/total": "3\n"}},
	)
}

// importPython copies the example python image into a new cache and returns
// the cache and the image's NAME@DIGEST.
func importPython(t *testing.T) (string, string) {
	cache := t.TempDir()
	s, err := runner.OpenImageStore(cache)
	if err != nil {
		t.Fatal(err)
	}
	return cache, testimage.Example(t, "python", s)
}

// TestContainerfilePackageBuiltPushedPulledAndReproduced is the whole path
// of a package's environment: a Containerfile FROM an image in the store
// plus Debian packages from a loopback apt repository, built twice (two
// caches, one digest), pushed with basic auth to a TLS registry, checked
// pullable by `manifest validate`, pulled anonymously by digest into a
// third, empty cache by `dotlab rerun` (real runc), and reproduced there;
// then a Containerfile FROM the pushed image, in a fourth cache, pulls it
// from the registry by digest and builds on it.
func TestContainerfilePackageBuiltPushedPulledAndReproduced(t *testing.T) {
	testfix.Need(t, true, "buildah", "runc", "dpkg-deb", "docker-registry")
	cache1, base := importPython(t)
	repo := helloRepo(t)
	pkg := t.TempDir()
	os.WriteFile(filepath.Join(pkg, "test.list"), []byte(repo.SourcesLine+"\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "Containerfile"), []byte("FROM "+base+"\n"+
		"COPY test.list /etc/apt/sources.list\n"+
		"RUN rm -f /etc/apt/sources.list.d/* && apt-get update -qq && \\\n"+
		"    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dotlab-hello && \\\n"+
		"    apt-get clean && rm -rf /var/lib/apt/lists/*\n"), 0o644)
	build := func(cache string) string {
		t.Helper()
		start := time.Now()
		out, errOut, code := runCLI(t, "image", "build", "--containerfile", filepath.Join(pkg, "Containerfile"), pkg, "--ref", "lab/hello",
			"--cache", cache, "--egress", repo.URL, "--allow-private-urls")
		if code != 0 {
			t.Fatalf("image build: exit %d\n%s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		f := strings.Fields(lines[len(lines)-1])
		if len(f) != 2 || f[1] != "lab/hello@"+f[0] {
			t.Fatalf("last line %q, want DIGEST<TAB>NAME@DIGEST", lines[len(lines)-1])
		}
		t.Logf("built %s in %s", f[0], time.Since(start).Round(time.Millisecond))
		return f[0]
	}
	d := build(cache1)
	cache2, _ := importPython(t)
	if d2 := build(cache2); d2 != d {
		t.Fatalf("two builds, two digests: %s and %s", d, d2)
	}

	reg := registrytest.Start(t)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	t.Setenv(runner.TrustCAEnv, reg.CAFile)
	out, errOut, code := runCLI(t, "image", "push", "lab/hello@"+d, reg.Push+"/lab/hello:1.0", "--cache", cache1, "--allow-private-urls")
	if code != 0 || strings.TrimSpace(out) != reg.Push+"/lab/hello@"+d {
		t.Fatalf("image push: exit %d %q %s", code, out, errOut)
	}
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // runners pull anonymously

	mpath, local := helloManifest(t, reg.Pull+"/lab/hello@"+d)
	_, errOut, code = runCLI(t, "manifest", "validate", mpath, "--allow-private-urls")
	if code != 0 || strings.Contains(errOut, "cannot be pulled") {
		t.Fatalf("validate a pushed image: exit %d %s", code, errOut)
	}
	localOnly, _ := helloManifest(t, "lab/hello@"+d)
	_, errOut, code = runCLI(t, "manifest", "validate", localOnly, "--allow-private-urls")
	if code != 0 || !strings.Contains(errOut, "only in this machine's store: push it with dotlab image push") {
		t.Fatalf("validate an image only in the store: exit %d %s", code, errOut)
	}

	cache3 := t.TempDir()
	table, errOut, code := runCLI(t, "rerun", mpath, "--cache", cache3, "--out", filepath.Join(t.TempDir(), "run"),
		"--allow-local", local, "--allow-private-urls")
	if code != 0 || !strings.Contains(table, "outcome: reproduced") {
		t.Fatalf("rerun from the registry: exit %d\n%s\n%s", code, table, errOut)
	}
	if list, _, _ := runCLI(t, "image", "list", "--cache", cache3); !strings.Contains(list, d) {
		t.Fatalf("the rerun did not pull %s into the empty cache: %s", d, list)
	}

	// FROM an image that is only in a registry: pulled by digest, then built on.
	next := t.TempDir()
	os.WriteFile(filepath.Join(next, "Containerfile"), []byte("FROM "+reg.Pull+"/lab/hello@"+d+"\nRUN dotlab-hello > /opt/total.json\n"), 0o644)
	cache4 := t.TempDir()
	out, errOut, code = runCLI(t, "image", "build", "--containerfile", filepath.Join(next, "Containerfile"), "--ref", "lab/next",
		"--cache", cache4, "--allow-private-urls")
	if code != 0 || !strings.Contains(out, "lab/next@sha256:") {
		t.Fatalf("build FROM a registry image: exit %d %s\n%s", code, out, errOut)
	}
}

// helloManifest writes a manifest running dotlab-hello in image; it
// returns its path and the local directory its data and code are in.
func helloManifest(t *testing.T, image string) (string, string) {
	local := t.TempDir()
	data := []byte("x\n1\n2\n")
	os.WriteFile(filepath.Join(local, "d.csv"), data, 0o644)
	sum := sha256.Sum256(data)
	repoDir := filepath.Join(local, "repo")
	r, _ := git.PlainInit(repoDir, false)
	os.WriteFile(filepath.Join(repoDir, "run.sh"), []byte(`dotlab-hello > "$DOTLAB_OUT_DIR/results.json"`+"\n"), 0o644)
	wt, _ := r.Worktree()
	wt.Add("run.sh")
	h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.org", When: time.Unix(1e9, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	m := fmt.Sprintf(`{"spec_version":"0.1","title":"hello","source":{"citation":"test"},
 "datasets":[{"name":"d","url":"file://%s","sha256":"%s"}],
 "code":{"repository":"%s","commit":"%s"},
 "environment":{"image":%q},
 "entrypoint":["sh","run.sh"],
 "targets":[{"name":"total","value":3.0,"tolerance":{"type":"absolute","value":0}}]}`,
		filepath.Join(local, "d.csv"), hex.EncodeToString(sum[:]), repoDir, h, image)
	p := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(p, []byte(m), 0o644)
	return p, local
}

// TestImageBuildRefusalsNameTheRule: a tag in FROM, an ADD <url> and a RUN
// that reaches for a host outside the egress list are each refused with a
// message naming the rule.
func TestImageBuildRefusalsNameTheRule(t *testing.T) {
	testfix.Need(t, true, "buildah", "runc")
	cache, base := importPython(t)
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "outside") }))
	defer outside.Close()
	listed := httptest.NewServer(http.NotFoundHandler())
	defer listed.Close()
	for name, c := range map[string]struct{ containerfile, rule string }{
		"tag in FROM": {"FROM docker.io/library/debian:bookworm\n", "FROM by digest only"},
		"ADD url":     {"FROM " + base + "\nADD https://example.org/data.tar.gz /data/\n", "no ADD <url>"},
		"RUN outside": {"FROM " + base + "\nRUN python3 -c 'import urllib.request; urllib.request.urlopen(\"" + outside.URL + "/x\")'\n", imagebuild.EgressRule},
	} {
		t.Run(name, func(t *testing.T) {
			pkg := t.TempDir()
			cf := filepath.Join(pkg, "Containerfile")
			os.WriteFile(cf, []byte(c.containerfile), 0o644)
			_, errOut, code := runCLI(t, "image", "build", "--containerfile", cf, "--ref", "lab/x", "--cache", cache,
				"--egress", listed.URL, "--allow-private-urls")
			if code == 0 || !strings.Contains(errOut, c.rule) {
				t.Fatalf("exit %d, want a refusal naming %q:\n%s", code, c.rule, errOut)
			}
		})
	}
}
