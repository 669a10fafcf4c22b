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
//
// A claim written for DotLab gives its data file (Data) and its targets here,
// and the demo writes its manifest. A replication package as published gives
// Manifest instead: the example's own manifest.json (targets with their
// sources, scratch, no datasets), which the demo only re-pins to this
// machine's archive and image build.
type Example struct {
	Dir           string          `json:"dir"`
	Code          string          `json:"code,omitempty"` // take the code of another example (default: Dir)
	Field         string          `json:"field"`
	Expect        dotlab.Outcome  `json:"expect"`
	Demonstration string          `json:"demonstration,omitempty"`
	Manifest      string          `json:"manifest,omitempty"` // the example's own manifest file (package-shaped)
	Title         string          `json:"title,omitempty"`
	Source        dotlab.Source   `json:"source,omitempty"`
	Data          string          `json:"data,omitempty"`
	PinSHA256     string          `json:"pin_sha256,omitempty"`
	Requires      []string        `json:"requires,omitempty"`
	Targets       []dotlab.Target `json:"targets,omitempty"`
}

// ImageName is the repository name of the example Python image, the image
// of the claims written for DotLab. Package-shaped examples name their own
// recipe's image (dotlab.example/RECIPE, built by examples/images/RECIPE).
const ImageName = "dotlab.example/python"

// imagePrefix is the repository prefix of the images the recipes under
// examples/images build.
const imagePrefix = "dotlab.example/"

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
	for i, ex := range exs {
		if (ex.Manifest == "") == (ex.Data == "") {
			return nil, fmt.Errorf("examples/claims/claims.json[%d] (%s): give either \"data\" (a claim written for DotLab) or \"manifest\" (a package's own manifest), not both or neither", i, ex.Dir)
		}
	}
	return exs, nil
}

// Image is an example image built on this machine.
type Image struct {
	Ref    string // NAME@DIGEST
	Rootfs string // the recipe's cached rootfs (its dpkg status gives the versions)
	Log    string // the recipe's build output (varDir/images/RECIPE.log)
}

// Version returns the version of a Debian package installed in the image
// ("" when absent).
func (im Image) Version(pkg string) string {
	return dpkgVersion(filepath.Join(im.Rootfs, "var", "lib", "dpkg", "status"), pkg)
}

// BuildImage makes sure the image of an examples/images recipe ("python",
// "python-sci", "r") is in the store under varDir/cache, building it with
// examples/images/RECIPE/build.sh (debootstrap and apt; a minute for python,
// several for the scientific ones, once: the rootfs is cached in
// varDir/images) when it is missing. self is the dotlab binary the recipe
// packs with.
func BuildImage(examplesDir, varDir, self, recipe string, logf func(string, ...any)) (Image, error) {
	rootfs := filepath.Join(varDir, "images", recipe+"-rootfs")
	if _, err := os.Stat(filepath.Join(rootfs, ".dotlab-complete")); err != nil {
		logf("building the example image %s%s (examples/images/%s/build.sh: debootstrap and apt, minutes the first time; cached afterwards)", imagePrefix, recipe, recipe)
	}
	script := filepath.Join(examplesDir, "images", recipe, "build.sh")
	logPath, err := recipeLogPath(varDir, recipe)
	if err != nil {
		return Image{}, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return Image{}, err
	}
	defer logFile.Close()
	cmd := exec.Command("bash", script, self, varDir)
	// debootstrap's and apt's thousands of lines go to the recipe's log,
	// not the terminal (one line per recipe there).
	cmd.Stderr = logFile
	out, err := cmd.Output()
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w (it needs root, debootstrap and Debian's mirror: apt-get install -y debootstrap; its output: %s)", script, err, logPath)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return Image{}, fmt.Errorf("%s printed no digest", script)
	}
	ref := fields[len(fields)-1]
	if !strings.HasPrefix(ref, imagePrefix+recipe+"@sha256:") {
		return Image{}, fmt.Errorf("%s: unexpected output %q", script, out)
	}
	store, err := runner.OpenImageStore(filepath.Join(varDir, "cache"))
	if err != nil {
		return Image{}, err
	}
	d, err := imagestore.ParseDigest(ref[strings.Index(ref, "@")+1:])
	if err != nil || !store.Has(d) {
		return Image{}, fmt.Errorf("image %s is not in the store after building: %v", ref, err)
	}
	return Image{Ref: ref, Rootfs: rootfs, Log: logPath}, nil
}

// recipeLogPath is where a recipe's build output goes:
// varDir/images/RECIPE.log (the directory made when missing).
func recipeLogPath(varDir, recipe string) (string, error) {
	dir := filepath.Join(varDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, recipe+".log"), nil
}

// recipeOf returns the examples/images recipe that builds a reference
// dotlab.example/RECIPE[@…], or false for any other image.
func recipeOf(ref string) (string, bool) {
	name, ok := strings.CutPrefix(ref, imagePrefix)
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(name, "@:"); i >= 0 {
		name = name[:i]
	}
	return name, name != "" && !strings.ContainsAny(name, "/.")
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
// manifest text pinning every hash and the image. images holds the images
// built on this machine by recipe name; a claim written for DotLab runs in
// "python", a package-shaped one in the recipe its own manifest names.
func (a *Archive) Prepare(examplesDir string, ex Example, images map[string]Image) ([]byte, error) {
	codeDir := ex.Dir
	if ex.Code != "" {
		codeDir = ex.Code
	}
	commit, err := CommitExample(filepath.Join(examplesDir, "claims", codeDir, "code"), filepath.Join(a.Root, "git", ex.Dir))
	if err != nil {
		return nil, fmt.Errorf("%s: code repository: %w", ex.Dir, err)
	}
	var m *dotlab.Manifest
	if ex.Manifest != "" {
		m, err = a.repinPackage(examplesDir, ex, commit, images)
	} else {
		m, err = a.written(examplesDir, ex, commit, images["python"])
	}
	if err != nil {
		return nil, err
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

// written writes the manifest of a claim written for DotLab: its data file
// served by the archive, its code at commit, the example Python image.
func (a *Archive) written(examplesDir string, ex Example, commit string, img Image) (*dotlab.Manifest, error) {
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
	deps := map[string]string{}
	if v := img.Version("python3.11-minimal"); v != "" {
		deps["python3.11-minimal"] = v
	}
	return &dotlab.Manifest{
		SpecVersion: dotlab.SpecVersion,
		Title:       ex.Title,
		Source:      ex.Source,
		Datasets:    []dotlab.Dataset{{Name: strings.TrimSuffix(ex.Data, filepath.Ext(ex.Data)), URL: a.URL + "/data/" + ex.Dir + "/" + ex.Data, SHA256: pin, Path: ex.Data}},
		Code:        dotlab.Code{Repository: a.URL + "/git/" + ex.Dir, Commit: commit},
		Environment: dotlab.Environment{Image: img.Ref, Dependencies: deps},
		Requires:    ex.Requires,
		Entrypoint:  []string{"python3", "analysis.py"},
		Limits:      dotlab.Limits{TimeoutSeconds: 300, MemoryMB: 512, CPUs: 1},
		Targets:     ex.Targets,
	}, nil
}

// repinPackage reads a package-shaped example's own manifest and changes
// only what depends on this machine: the code repository's address (the
// archive's), the image digest (this machine's build of the recipe the
// manifest names) and the versions of the packages it lists. The commit must
// be the one the manifest pins (the code is committed at a fixed time, so
// it is the same everywhere); datasets are not served, so a package example
// keeps its data in its code.
func (a *Archive) repinPackage(examplesDir string, ex Example, commit string, images map[string]Image) (*dotlab.Manifest, error) {
	path := filepath.Join(examplesDir, "claims", ex.Dir, ex.Manifest)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(m.Datasets) != 0 || len(m.Helpers) != 0 || m.Code.Archive != nil {
		return nil, fmt.Errorf("%s: the demo serves a package example's code from git only, with no datasets or helpers", path)
	}
	if m.Code.Commit != commit {
		return nil, fmt.Errorf("%s: code/ commits as %s, the manifest pins %s (update code.commit)", path, commit, m.Code.Commit)
	}
	recipe, ok := recipeOf(m.Environment.Image)
	img, built := images[recipe]
	if !ok || !built {
		return nil, fmt.Errorf("%s: environment.image %s is not one of the example images (%s<recipe> of examples/images)", path, m.Environment.Image, imagePrefix)
	}
	m.Code.Repository = a.URL + "/git/" + ex.Dir
	m.Environment.Image = img.Ref
	for pkg := range m.Environment.Dependencies {
		if v := img.Version(pkg); v != "" {
			m.Environment.Dependencies[pkg] = v
		}
	}
	return m, nil
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

// CommitExample makes dst (removed first) a git repository holding the
// regular files of src in one commit with the examples' fixed author,
// committer, message and time (2026-01-01 UTC), and returns the commit id:
// the same on every machine for the same files, so it is the commit an
// example's manifest.json pins. The demo, the package tests and the
// benchmarks commit examples/claims/*/code with it.
func CommitExample(src, dst string) (string, error) {
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
