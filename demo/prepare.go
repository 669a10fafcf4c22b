// Package demo runs DotLab on real published claims end to end: it prepares
// the example claims (data served over HTTP, analysis code in git
// repositories it creates, manifests pinning every hash and the image
// digest), starts a server, registers agents and lets them work through
// every lifecycle path, including one dispute decided by votes.
package demo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Example is one entry of examples/claims/claims.json.
type Example struct {
	Dir           string          `json:"dir"`
	Code          string          `json:"code,omitempty"` // take the code of another example (default: Dir)
	Field         string          `json:"field"`
	Expect        dotlab.Outcome  `json:"expect"`
	Demonstration string          `json:"demonstration,omitempty"`
	Title         string          `json:"title"`
	Source        dotlab.Source   `json:"source"`
	Data          string          `json:"data"`
	PinSHA256     string          `json:"pin_sha256,omitempty"`
	Requires      []string        `json:"requires"`
	Targets       []dotlab.Target `json:"targets"`
}

// ImageName is the example image's repository name.
const ImageName = "dotlab.example/python"

// commitUnix is the time of the example repositories' commits (2026-01-01
// UTC), fixed so that the same code gives the same commit id on every
// machine.
const commitUnix = 1767225600

// LoadExamples reads examples/claims/claims.json.
func LoadExamples(examplesDir string) ([]Example, error) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "claims", "claims.json"))
	if err != nil {
		return nil, fmt.Errorf("example claims: %w (run the demo from the repository root, or give --examples)", err)
	}
	var exs []Example
	if err := json.Unmarshal(data, &exs); err != nil {
		return nil, fmt.Errorf("examples/claims/claims.json: %w", err)
	}
	return exs, nil
}

// BuildImage makes sure the example Python image is in the store under
// cacheDir, building it with examples/images/python/build.sh (debootstrap;
// about a minute, once) when it is missing. It returns the image reference
// NAME@DIGEST and the python3 package version inside.
func BuildImage(examplesDir, varDir, self string, logf func(string, ...any)) (ref, pyVersion string, err error) {
	rootfs := filepath.Join(varDir, "images", "python-rootfs")
	if _, err := os.Stat(filepath.Join(rootfs, ".dotlab-complete")); err != nil {
		logf("building the example Python image (debootstrap, about a minute; cached afterwards)")
	}
	script := filepath.Join(examplesDir, "images", "python", "build.sh")
	cmd := exec.Command("bash", script, self, varDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("%s: %w (it needs root and debootstrap: apt-get install -y debootstrap)", script, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "", "", fmt.Errorf("%s printed no digest", script)
	}
	ref = fields[len(fields)-1]
	if !strings.Contains(ref, "@sha256:") {
		return "", "", fmt.Errorf("%s: unexpected output %q", script, out)
	}
	store, err := runner.OpenImageStore(filepath.Join(varDir, "cache"))
	if err != nil {
		return "", "", err
	}
	d, err := imagestore.ParseDigest(ref[strings.Index(ref, "@")+1:])
	if err != nil || !store.Has(d) {
		return "", "", fmt.Errorf("image %s is not in the store after building: %v", ref, err)
	}
	return ref, dpkgVersion(filepath.Join(rootfs, "var", "lib", "dpkg", "status"), "python3.11-minimal"), nil
}

// dpkgVersion reads a package's version from a dpkg status file ("" when absent).
func dpkgVersion(statusFile, pkg string) string {
	f, err := os.Open(statusFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Package: "):
			in = line == "Package: "+pkg
		case in && strings.HasPrefix(line, "Version: "):
			return strings.TrimPrefix(line, "Version: ")
		}
	}
	return ""
}

// Archive serves the examples' data files and git repositories on loopback:
// /data/<dir>/<file> and /git/<dir> (smart HTTP through git http-backend).
type Archive struct {
	Root string // directory with data/ and git/
	URL  string // http://127.0.0.1:PORT
	srv  *http.Server
}

// StartArchive serves root on addr (e.g. 127.0.0.1:8090; port 0 picks one).
func StartArchive(root, addr string) (*Archive, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("the demo serves its code repositories with git http-backend: install git (apt-get install -y git)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("archive server on %s: %w (free the port or give --archive-addr)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/data/", http.StripPrefix("/data/", http.FileServer(http.Dir(filepath.Join(root, "data")))))
	mux.Handle("/git/", &cgi.Handler{Path: gitPath, Root: "/git", Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Join(root, "git"), "GIT_HTTP_EXPORT_ALL=1"}})
	a := &Archive{Root: root, URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go a.srv.Serve(ln)
	return a, nil
}

// Close stops the archive server.
func (a *Archive) Close() error { return a.srv.Close() }

// Prepare lays out one example in the archive (its data file, a git
// repository with its code, committed at a fixed time) and returns its
// manifest text pinning every hash and the image.
func (a *Archive) Prepare(examplesDir string, ex Example, imageRef, pyVersion string) ([]byte, error) {
	src := filepath.Join(examplesDir, "claims", ex.Dir)
	dataDir := filepath.Join(a.Root, "data", ex.Dir)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	sum, err := copyFile(filepath.Join(src, ex.Data), filepath.Join(dataDir, ex.Data))
	if err != nil {
		return nil, err
	}
	pin := sum
	if ex.PinSHA256 != "" {
		pin = ex.PinSHA256 // the demonstration of input_mismatch pins the original file
	}
	codeDir := ex.Dir
	if ex.Code != "" {
		codeDir = ex.Code
	}
	commit, err := gitRepo(filepath.Join(examplesDir, "claims", codeDir, "code"), filepath.Join(a.Root, "git", ex.Dir))
	if err != nil {
		return nil, fmt.Errorf("%s: code repository: %w", ex.Dir, err)
	}
	deps := map[string]string{}
	if pyVersion != "" {
		deps["python3.11-minimal"] = pyVersion
	}
	m := dotlab.Manifest{
		SpecVersion: dotlab.SpecVersion,
		Title:       ex.Title,
		Source:      ex.Source,
		Datasets:    []dotlab.Dataset{{Name: strings.TrimSuffix(ex.Data, filepath.Ext(ex.Data)), URL: a.URL + "/data/" + ex.Dir + "/" + ex.Data, SHA256: pin, Path: ex.Data}},
		Code:        dotlab.Code{Repository: a.URL + "/git/" + ex.Dir, Commit: commit},
		Environment: dotlab.Environment{Image: imageRef, Dependencies: deps},
		Requires:    ex.Requires,
		Entrypoint:  []string{"python3", "analysis.py"},
		Limits:      dotlab.Limits{TimeoutSeconds: 300, MemoryMB: 512, CPUs: 1},
		Targets:     ex.Targets,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	if _, err := manifest.Parse(raw); err != nil {
		return nil, fmt.Errorf("%s: generated manifest is invalid: %w", ex.Dir, err)
	}
	return raw, nil
}

func copyFile(from, to string) (string, error) {
	in, err := os.Open(from)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), out.Close()
}

// gitRepo makes dst a git repository holding the files of src in one commit
// with a fixed author, committer and time, and returns the commit id (the
// same on every machine for the same files).
func gitRepo(src, dst string) (string, error) {
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	repo, err := git.PlainInit(dst, false)
	if err != nil {
		return "", err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if _, err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return "", err
		}
		if _, err := wt.Add(e.Name()); err != nil {
			return "", err
		}
	}
	sig := &object.Signature{Name: "DotLab examples", Email: "examples@dotlab.invalid", When: time.Unix(commitUnix, 0).UTC()}
	h, err := wt.Commit("Analysis code for the DotLab example claim", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
