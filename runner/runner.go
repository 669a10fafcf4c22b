// Package runner is the replication workflow of a DotLab agent (docs/protocol.md
// §3 "Lifecycle", the runner's step; docs/sandbox.md "The workflow"):
// verify every input hash → resolve and unpack the pinned image → fetch the
// code at the pinned commit → execute the entrypoint in the sandbox → read
// results.json → compare with exact decimals → record run.json and logs.jsonl.
package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/safefs"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/dotlab/dotlab/strictjson"
	"golang.org/x/sys/unix"
)

// Runner reruns manifests. All fields but Progress are required (New fills them).
type Runner struct {
	Store   *imagestore.Store
	Cache   *Cache
	Runtime sandbox.Runtime
	Policy  Policy
	// Clock stamps log lines and measures steps.
	Clock dotlab.Clock
	// Progress, when set, sees long steps (downloads, unpacking): what, bytes
	// done, bytes total (-1 when unknown).
	Progress func(what string, done, total int64)
	// Echo, when set, sees every log entry as it is written.
	Echo func(LogEntry)
	// ScratchDir holds per-run working copies (code, data layout); it is
	// emptied after each run. Default: <cache>/work.
	ScratchDir string
	// OutputBytes caps /work/out (0: sandbox default, 1 GiB).
	OutputBytes int64
}

// The layout of a runner's cache directory (docs/sandbox.md "The
// workflow"): images (OCI store and unpacked rootfs), blobs (verified
// downloads by sha256) and work (per-run scratch copies).
const (
	cacheImages = "images"
	cacheBlobs  = "blobs"
	cacheWork   = "work"
	// cacheRuntimeVersion keeps the runtime's probed version and package
	// between reruns (sandbox.Runtime.VersionCache).
	cacheRuntimeVersion = "runtime-version.json"
)

// OpenImageStore opens the image store of the cache directory cacheDir,
// the one `dotlab image` commands and every rerun use.
func OpenImageStore(cacheDir string) (*imagestore.Store, error) {
	return imagestore.Open(filepath.Join(cacheDir, cacheImages))
}

// New returns a Runner keeping images and downloads under cacheDir.
func New(cacheDir string, rt sandbox.Runtime, p Policy, clock dotlab.Clock) (*Runner, error) {
	// Bundles mount paths under the cache; the runtime resolves them from
	// the bundle directory, so they must be absolute.
	cacheDir, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, err
	}
	if p.LocalRoot != "" {
		if fi, err := os.Stat(p.LocalRoot); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--allow-local %s: not a directory: name the directory your manifest's local files are in", p.LocalRoot)
		}
	}
	store, err := OpenImageStore(cacheDir)
	if err != nil {
		return nil, err
	}
	cache, err := OpenCache(filepath.Join(cacheDir, cacheBlobs))
	if err != nil {
		return nil, err
	}
	if rt.Clock == nil {
		rt.Clock = clock
	}
	if rt.VersionCache == "" {
		rt.VersionCache = filepath.Join(cacheDir, cacheRuntimeVersion)
	}
	return &Runner{Store: store, Cache: cache, Runtime: rt, Policy: p, Clock: clock, ScratchDir: filepath.Join(cacheDir, cacheWork)}, nil
}

// Record is the result of one rerun: the run body (run.json, the POST /runs
// body with job_id empty) and the full comparisons for display.
type Record struct {
	Body        dotlab.RunBody
	Comparisons []dotlab.Comparison
	// Extra lists results.json keys that are not targets (logged, not fatal).
	Extra []string
	// ReadFrom says, by target name, where its rerun value was read:
	// "/work/out/results.json", or the target's source ("stdout, regex …",
	// "/work/scratch/t.csv, csv …"; docs/manifest-spec.md "targets[].source").
	ReadFrom map[string]string
	// Refused lists the requests the sandbox's download responder refused
	// (refusedRequests: method and URL, or host for a CONNECT), so the
	// author sees what to pin without reading logs.jsonl.
	Refused []string
}

// Files written into the out directory.
const (
	RunFile  = "run.json"
	LogsFile = "logs.jsonl"
	OutSub   = "out" // the analysis's /work/out files land in DIR/out/
)

// specIssue ends a run with outcome spec_issue; the message becomes the note.
type specIssue struct{ note string }

func (e *specIssue) Error() string { return e.note }

func issuef(format string, args ...any) error {
	return &specIssue{note: scrubURLs(fmt.Sprintf(format, args...))}
}

// Rerun executes m and writes run.json, logs.jsonl and out/ into outDir
// (created if needed; out/ must not already hold files). It returns the
// record whenever an outcome could be decided, including spec_issue and
// input_mismatch; an error means no outcome (the sandbox or the network
// failed, the run was cancelled) and nothing should be published.
func (r *Runner) Rerun(ctx context.Context, m *dotlab.Manifest, outDir string) (*Record, error) {
	if err := os.MkdirAll(filepath.Join(outDir, OutSub), 0o755); err != nil {
		return nil, err
	}
	if entries, _ := os.ReadDir(filepath.Join(outDir, OutSub)); len(entries) > 0 {
		return nil, fmt.Errorf("%s: already holds files from an earlier run; give --out an empty or new directory", filepath.Join(outDir, OutSub))
	}
	logf, err := os.Create(filepath.Join(outDir, LogsFile))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	log := NewLog(logf, r.Clock, r.Echo)
	f := newFacts(m)
	log.Info("run", "rerun started", map[string]any{"title": m.Title, "runtime": r.runtimeName(), "image": m.Environment.Image})

	err = r.rerun(ctx, log, m, outDir, f)
	if !errors.As(err, &f.issue) && err != nil {
		log.Error("outcome", "no outcome: "+errText(err), nil)
		return nil, err
	}
	if a := archiveFrom(ctx); a != nil {
		uploadVerified(ctx, log, a, &f.trail)
	}
	rec := decide(log, m, f)
	rec.Body.Notes = boundNotes(rec.Body.Notes)
	log.Info("outcome", string(rec.Body.Outcome), map[string]any{"outcome": rec.Body.Outcome, "notes": rec.Body.Notes})
	if err := os.WriteFile(filepath.Join(outDir, RunFile), MarshalBody(rec.Body), 0o644); err != nil {
		return nil, err
	}
	if err := log.Err(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", LogsFile, err)
	}
	return rec, nil
}

// MarshalBody is run.json's text: indented JSON, "<>&" not escaped, newline-terminated.
func MarshalBody(b dotlab.RunBody) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(b)
	return buf.Bytes()
}

// MaxNotes bounds run notes. Notes quote what the analysis controls (its
// stderr, its extra result keys), so they are cut to stay well inside the
// server's limit; the full text is in logs.jsonl.
const MaxNotes = 4000

// boundNotes cuts notes to MaxNotes bytes at a rune boundary.
func boundNotes(s string) string {
	if len(s) <= MaxNotes {
		return s
	}
	cut := MaxNotes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " … (cut; the full text is in logs.jsonl)"
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

func (r *Runner) runtimeName() string {
	if r.Runtime.Name == "" {
		return "runc"
	}
	return r.Runtime.Name
}

func (r *Runner) since(t time.Time) float64 { return r.Clock.Now().Sub(t).Seconds() }

// rerun takes the steps of docs/sandbox.md in order, each adding what it
// found to f; it stops at the first that ends the run (an error, a
// spec_issue, or a dataset hash mismatch in f). decide turns f into the
// outcome.
func (r *Runner) rerun(ctx context.Context, log *Log, m *dotlab.Manifest, outDir string, f *facts) error {
	if err := r.Runtime.Check(); err != nil {
		return err
	}
	// A runtime build without the defences docs/sandbox.md lists is refused
	// before anything is fetched (no outcome: the runner's machine, not the
	// claim, is at fault). Probed once per binary.
	if _, err := r.Runtime.CheckVersion(ctx); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(r.scratch(), "run-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := os.Chmod(scratch, 0o755); err != nil {
		return err
	}
	// Steps 1-3: inputs, environment, code.
	w, err := r.prepare(ctx, log, m, scratch, f)
	if err != nil || len(f.mismatches) > 0 {
		return err
	}
	// Step 4: execute.
	if err := r.run(ctx, log, m, w, filepath.Join(outDir, OutSub), f); err != nil {
		return err
	}
	// Step 5: results (step 6, the comparison, is decide's).
	return r.results(log, m, w, f)
}

// workspace is what the sandbox mounts: the unpacked image and the code and
// data laid out in the run's scratch directory.
type workspace struct {
	img                                  *imagestore.Image
	rootfs, codeDir, dataDir, helpersDir string
	// out is what target sources read, filled by run.
	out *outputs
	// downloads are the verified pinned downloads the sandbox answers (runner/downloads.go).
	downloads []sandbox.Download
}

// prepare fetches and verifies everything the manifest pins (datasets, the
// image, the code) under one fetch budget (Policy.Timeout; the stall rule
// lives in the policy's transport). A dataset's or a pinned download's hash
// mismatch is recorded in facts.mismatches and returns no workspace (decide
// makes it input_mismatch; runner/downloads.go); a helper hash mismatch is
// spec_issue (the server accepts input_mismatch for datasets only).
func (r *Runner) prepare(ctx context.Context, log *Log, m *dotlab.Manifest, scratch string, fs *facts) (*workspace, error) {
	f := &fetcher{cache: r.Cache, policy: r.Policy, client: r.Policy.Client(), progress: r.Progress, archive: archiveFrom(ctx), trail: &fs.trail}
	fctx, cancelFetch := r.Policy.budget(ctx)
	defer cancelFetch()
	defer reportArchived(log, f.trail, fs)

	// 1. Inputs: every dataset hashed while it downloads; any mismatch stops here.
	paths, mismatches, err := r.inputs(fctx, log, f, m, fs)
	if err != nil || len(mismatches) > 0 {
		fs.mismatches = mismatches
		return nil, err
	}
	served, dmis, err := r.downloads(fctx, log, f, m, fs)
	if err != nil || len(dmis) > 0 {
		fs.mismatches = dmis
		return nil, err
	}
	w := &workspace{codeDir: filepath.Join(scratch, "code"), dataDir: filepath.Join(scratch, "data"), downloads: served}
	helpers, err := r.helpers(fctx, log, f, m, fs)
	if err != nil {
		return nil, err
	}
	// 2. Environment: the image by digest, unpacked once per digest.
	if w.img, w.rootfs, err = r.environment(fctx, log, m); err != nil {
		return nil, err
	}
	if err := checkZone(log, m, w.rootfs); err != nil {
		return nil, err
	}
	// 3. Code at the pinned commit, or the pinned archive.
	if err := os.Mkdir(w.codeDir, 0o755); err != nil {
		return nil, err
	}
	if err := r.code(fctx, log, f, m, w.codeDir, scratch); err != nil {
		return nil, err
	}
	if a := m.Code.Archive; a != nil {
		fs.env.CodeArchiveSHA256 = a.SHA256
	} else {
		fs.env.CodeCommit = m.Code.Commit
	}
	if err := r.patchCode(log, m, w.codeDir, fs); err != nil {
		return nil, err
	}
	// Data and helpers laid out read-only under what becomes /work/data and /work/helpers.
	if err := layoutFiles("datasets", w.dataDir, dataFiles(m, paths)); err != nil {
		return nil, err
	}
	if len(m.Helpers) > 0 {
		w.helpersDir = filepath.Join(scratch, "helpers")
		if err := layoutFiles("helpers", w.helpersDir, helpers); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// run executes the entrypoint in the sandbox and records the runtime
// build, the output hashes and how the command ended.
func (r *Runner) run(ctx context.Context, log *Log, m *dotlab.Manifest, w *workspace, outDir string, f *facts) error {
	res, cap, err := r.execute(ctx, log, m, w, outDir)
	if errors.Is(err, sandbox.ErrUnsafeSpec) {
		// The image or working directory would take the container through
		// a runtime CVE's precondition (docs/sandbox.md "The runtime's own
		// version"): the claim cannot be run safely as written.
		log.Error("execute", "refused before the runtime was started", map[string]any{"error": errText(err)})
		return issuef("%v", err)
	}
	if err != nil {
		return err
	}
	logResponder(log, res.Downloads)
	f.refused = refusedRequests(res.Downloads)
	rt := res.Runtime
	f.env.Runtime = &rt
	outs := make([]output, 0, len(res.Files)+len(res.Kept))
	for _, of := range res.Files {
		outs = append(outs, output{of.Path, of.SHA256, of.Size, ""})
	}
	// The scratch files that target sources read are outputs too: their
	// hashes, keyed by their path in the sandbox (/work/scratch/…), let a
	// challenger compare what it read with what the runner read.
	for _, rel := range dotlab.SortedKeys(res.Kept) {
		if k := res.Kept[rel]; k.Problem == "" {
			sum := sha256.Sum256(k.Data)
			outs = append(outs, output{dotlab.SourceScratchDir + rel, hex.EncodeToString(sum[:]), int64(len(k.Data)), " (scratch, read by a target source)"})
		}
	}
	outs = append(outs, streamOutputs(cap)...)
	reportOutputs(log, outs, f)
	for _, rj := range res.Rejected {
		log.Warn("outputs", "rejected "+rj.Type+" "+rj.Path+" (not followed, not copied)", map[string]any{"path": rj.Path, "type": rj.Type})
	}
	w.out = &outputs{outDir: outDir, streams: cap.full, kept: res.Kept}
	if err := runProblems(m, res, cap.stderr.String()); err != nil {
		recordUncompared(log, m, w.out, f)
		return err
	}
	return nil
}

// output is one file a run reports in output_hashes: its key, hash and
// size, and what the log line adds to "output KEY".
type output struct {
	key, sha256 string
	size        int64
	what        string
}

// reportOutputs puts outs in f's output hashes and the log, except the
// files whose key a run body cannot carry. A server reads run bodies as
// strict JSON (docs/manifest-spec.md "4. Strict JSON parsing"): a key must
// be valid UTF-8 (two invalid names would both arrive as the same U+FFFD
// text), and no two keys may differ only in letter case. The analysis
// names its files, so such names are its doing; rather than make the run
// unpublishable, those files (every member of a group that differs only in
// case) are left out of output_hashes, each logged as a warning and named
// in the notes (docs/sandbox.md "After the run"). The outcome stands: output
// hashes are evidence, not results.
func reportOutputs(log *Log, outs []output, f *facts) {
	folded := map[string]int{}
	for _, o := range outs {
		if utf8.ValidString(o.key) && !reservedKey(o) {
			folded[strings.ToLower(o.key)]++
		}
	}
	var left []string
	for _, o := range outs {
		why := ""
		switch {
		case !utf8.ValidString(o.key):
			why = "its name is not valid UTF-8, which a run body cannot carry"
		case reservedKey(o):
			why = "its path begins with \"" + StreamKeyPrefix + "\", which output_hashes reserves for the captured streams"
		case folded[strings.ToLower(o.key)] > 1:
			why = "its path differs from another output's only in letter case, which a run body cannot carry"
		}
		if why == "" {
			f.outputs[o.key] = o.sha256
			log.Info("outputs", "output "+o.key+o.what, map[string]any{"path": o.key, "bytes": o.size, "sha256": o.sha256})
			continue
		}
		msg := fmt.Sprintf("output %q is not in output_hashes: %s", o.key, why)
		log.Warn("outputs", msg, map[string]any{"name": fmt.Sprintf("%q", o.key), "bytes": o.size, "sha256": o.sha256})
		left = append(left, msg)
	}
	if len(left) > 0 {
		f.notes = joinNotes(f.notes, strings.Join(left, "; "))
	}
}

// results reads results.json from the output directory, then every target
// source results.json leaves open, into f's rerun values.
func (r *Runner) results(log *Log, m *dotlab.Manifest, w *workspace, f *facts) error {
	rerun, extra, err := readResults(w.out.outDir, m.Targets)
	f.readFrom = map[string]string{}
	for name := range rerun {
		f.readFrom[name] = dotlab.SourceOutDir + "results.json"
	}
	if err == nil {
		err = w.out.sourceValues(log, m.Targets, rerun, f.readFrom)
	}
	if err != nil {
		log.Error("results", err.Error(), nil)
		return err
	}
	f.rerun, f.extra = rerun, extra
	if len(extra) > 0 {
		log.Warn("results", "results.json has keys that are not targets (ignored)", map[string]any{"keys": extra})
		f.notes = joinNotes(f.notes, "results.json also had keys that are not targets (ignored): "+strings.Join(extra, ", "))
	}
	return nil
}

func (r *Runner) scratch() string {
	if r.ScratchDir != "" {
		os.MkdirAll(r.ScratchDir, 0o755)
		return r.ScratchDir
	}
	return os.TempDir()
}

// inputs fetches and checks every dataset. It returns the cache path of each
// verified dataset and one line per mismatch.
func (r *Runner) inputs(ctx context.Context, log *Log, f *fetcher, m *dotlab.Manifest, fs *facts) (map[string]string, []string, error) {
	paths := map[string]string{}
	var mismatches []string
	for i, d := range m.Datasets {
		what := fmt.Sprintf("datasets[%d] (%s)", i, d.Name)
		start := r.Clock.Now()
		got, err := f.fetch(ctx, what, d.URL, d.SHA256)
		if err != nil {
			if unfetchable(err) {
				log.Error("inputs", "dataset "+d.Name+" cannot be fetched", map[string]any{"name": d.Name, "url": redactURL(d.URL), "error": errText(err)})
				return nil, nil, issuef("dataset %s cannot be fetched as written: %v", d.Name, err)
			}
			return nil, nil, err
		}
		fs.inputs[d.Name] = got.SHA256
		data := map[string]any{"name": d.Name, "url": redactURL(d.URL), "expected": d.SHA256, "actual": got.SHA256,
			"bytes": got.Bytes, "cache_hit": got.CacheHit, "seconds": r.since(start)}
		if got.SHA256 != d.SHA256 {
			log.Error("inputs", "hash mismatch for dataset "+d.Name, data)
			mismatches = append(mismatches, fmt.Sprintf("dataset %s: expected sha256 %s, got %s", d.Name, d.SHA256, got.SHA256))
			continue
		}
		log.Info("inputs", "dataset "+d.Name+" hash verified", data)
		paths[d.Name] = got.Path
	}
	return paths, mismatches, nil
}

// environment resolves the image strictly by digest and unpacks it.
func (r *Runner) environment(ctx context.Context, log *Log, m *dotlab.Manifest) (*imagestore.Image, string, error) {
	start := r.Clock.Now()
	// The registry host is held to the URL rules before any request (the
	// dialer checks the resolved address again on every connection).
	if err := r.Policy.CheckImage("environment.image", m.Environment.Image); err != nil {
		log.Error("environment", "image registry refused", map[string]any{"image": m.Environment.Image, "error": errText(err)})
		return nil, "", issuef("%v", err)
	}
	opts := imagestore.PullOptions{Transport: r.Policy.Transport(), AllowHTTP: r.Policy.AllowPrivate}
	if r.Progress != nil {
		opts.Progress = func(done, total int64) { r.Progress("pull "+m.Environment.ImageDigest()[:19], done, total) }
	}
	img, pulled, err := r.Store.Resolve(ctx, m.Environment.Image, opts)
	switch {
	case errors.Is(err, imagestore.ErrNoDigest), errors.Is(err, imagestore.ErrImageUnknown), errors.Is(err, imagestore.ErrUnsafeImage), unfetchable(err):
		log.Error("environment", "image cannot be resolved", map[string]any{"image": m.Environment.Image, "error": errText(err)})
		return nil, "", issuef("environment.image %s: %v", m.Environment.Image, err)
	case err != nil:
		return nil, "", fmt.Errorf("environment.image: %s is not in the local image store (%s) and pulling it from its registry failed: %w",
			m.Environment.Image, r.Store.Dir(), err)
	}
	log.Info("environment", "image resolved by digest", map[string]any{"image": m.Environment.Image, "digest": img.Digest.String(),
		"manifest_digest": img.ManifestDigest.String(), "pulled": pulled, "seconds": r.since(start), "dependencies": m.Environment.Dependencies})
	start = r.Clock.Now()
	var progress imagestore.Progress
	if r.Progress != nil {
		progress = func(done, total int64) { r.Progress("unpack "+img.Digest.String()[:19], done, total) }
	}
	rootfs, err := r.Store.Rootfs(img, progress)
	if errors.Is(err, imagestore.ErrUnsafeImage) {
		// The pinned image cannot be unpacked safely: the claim cannot be
		// executed as written (not a failure of this runner).
		log.Error("environment", "image refused", map[string]any{"image": m.Environment.Image, "error": errText(err)})
		return nil, "", issuef("environment.image %s is refused: %v", m.Environment.Image, err)
	}
	if err != nil {
		return nil, "", err
	}
	log.Info("environment", "rootfs ready (read-only)", map[string]any{"rootfs": rootfs, "seconds": r.since(start)})
	return img, rootfs, nil
}

// code checks out the pinned commit or fetches and verifies the archive.
func (r *Runner) code(ctx context.Context, log *Log, f *fetcher, m *dotlab.Manifest, codeDir, scratch string) error {
	start := r.Clock.Now()
	if a := m.Code.Archive; a != nil {
		got, err := f.fetch(ctx, "code.archive", a.URL, a.SHA256)
		if err != nil {
			if unfetchable(err) {
				return issuef("code.archive cannot be fetched as written: %v", err)
			}
			return err
		}
		data := map[string]any{"url": redactURL(a.URL), "expected": a.SHA256, "actual": got.SHA256, "bytes": got.Bytes, "cache_hit": got.CacheHit}
		if got.SHA256 != a.SHA256 {
			log.Error("code", "hash mismatch for code.archive", data)
			return issuef("code.archive: expected sha256 %s, got %s; nothing was executed", a.SHA256, got.SHA256)
		}
		log.Info("code", "code.archive hash verified", data)
		if err := os.Remove(codeDir); err != nil {
			return err
		}
		top, err := unpackArchive(a, got.Path, codeDir, scratch)
		if err != nil {
			return err
		}
		log.Info("code", "code archive unpacked", map[string]any{"seconds": r.since(start), "stripped_top_folder": top})
		return nil
	}
	err := checkoutCommit(ctx, r.Policy, m.Code.Repository, m.Code.Commit, codeDir, scratch, CodeLimits())
	switch {
	case errors.Is(err, ErrNoCommit), errors.Is(err, ErrNoRepository), errors.Is(err, ErrUnsafeTree), unfetchable(err):
		log.Error("code", "code cannot be fetched", map[string]any{"repository": redactURL(m.Code.Repository), "commit": m.Code.Commit, "error": errText(err)})
		return issuef("%v", err)
	case err != nil:
		return err
	}
	log.Info("code", "commit checked out", map[string]any{"repository": redactURL(m.Code.Repository), "commit": m.Code.Commit, "seconds": r.since(start)})
	return nil
}

// unfetchable reports whether a fetch failure is the manifest's (outcome
// spec_issue) rather than this runner's network's (no outcome): a 4xx, a
// URL the policy refuses, a missing local file, a server that stalls below
// the minimum rate, a file over the byte limit, or the run's fetch budget
// running out.
func unfetchable(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Permanent() || errors.Is(err, ErrRefused) || errors.Is(err, os.ErrNotExist) ||
		errors.Is(err, ErrStalled) || errors.Is(err, ErrFetchBudget) || errors.Is(err, ErrTooLarge)
}

// placed is one verified file and where it appears under its directory.
type placed struct{ name, rel, src string }

// dataFiles lists the verified datasets at their data paths.
func dataFiles(m *dotlab.Manifest, paths map[string]string) []placed {
	var files []placed
	for _, d := range m.Datasets {
		files = append(files, placed{d.Name, d.DataPath(), paths[d.Name]})
	}
	return files
}

// layoutFiles places each verified file at dir/<rel> by hard link to the
// read-only cache file (copy across filesystems); what names the manifest
// field ("datasets", "helpers") in notes.
func layoutFiles(what, dir string, files []placed) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		rel := safefs.CleanName(f.rel)
		if rel == "" {
			return issuef("%s: %s has an empty path", what, f.name)
		}
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return issuef("%s: %s: path %q: %v", what, f.name, f.rel, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.Link(f.src, dst); err != nil {
			if !errors.Is(err, unix.EXDEV) {
				return issuef("%s: %s: path %q: %v", what, f.name, f.rel, err)
			}
			if err := copyFile(f.src, root, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(src string, root *os.Root, rel string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err = safefs.CreateFrom(root, rel, 0o400, in); err != nil {
		return err
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chown(-1, sandbox.GID); err != nil {
		return f.Chmod(0o400)
	}
	return f.Chmod(0o440)
}

// captured is what execute kept of the streams: the first and last 32 KiB
// of each for the log and notes, and the first MaxSourceBytes of each
// stream a target source reads.
type captured struct {
	stdout, stderr *tailBuffer
	full           map[string]*capBuffer
	sums           map[string]*streamSum // every byte of each stream, hashed (printed.go)
}

// capture makes the stream buffers: full copies only of the streams a
// target source reads.
func capture(m *dotlab.Manifest) (*captured, sandbox.IO) {
	c := &captured{stdout: &tailBuffer{max: 64 << 10}, stderr: &tailBuffer{max: 64 << 10}, full: map[string]*capBuffer{}}
	for _, t := range m.Targets {
		if t.Source != nil && t.Source.Stream != "" && c.full[t.Source.Stream] == nil {
			c.full[t.Source.Stream] = &capBuffer{max: MaxSourceBytes}
		}
	}
	io := sandbox.IO{Stdout: c.stdout, Stderr: c.stderr}
	if b := c.full["stdout"]; b != nil {
		io.Stdout = ioMulti(c.stdout, b)
	}
	if b := c.full["stderr"]; b != nil {
		io.Stderr = ioMulti(c.stderr, b)
	}
	return c, hashStreams(c, io)
}

func ioMulti(a, b io.Writer) io.Writer { return io.MultiWriter(a, b) }

// sandboxSpec is the sandbox's view of m in workspace w: mounts, argv,
// environment and limits; Keep lists the scratch files target sources read.
func (r *Runner) sandboxSpec(m *dotlab.Manifest, w *workspace) sandbox.Spec {
	lim := m.Limits.WithDefaults()
	spec := sandbox.Spec{
		Rootfs: w.rootfs, CodeDir: w.codeDir, DataDir: w.dataDir, HelpersDir: w.helpersDir, Scratch: m.Scratch,
		Args: m.Entrypoint, ImageEnv: w.img.Config.Config.Env, PackageEnv: m.Environment.Env, Seed: m.Seed, WorkingDir: m.Dir(), Downloads: w.downloads,
		Limits: sandbox.Limits{
			TimeoutSeconds: lim.TimeoutSeconds,
			MemoryBytes:    int64(lim.MemoryMB) << 20,
			CPUs:           lim.CPUs,
			OutputBytes:    r.OutputBytes,
		},
	}
	for _, t := range m.Targets {
		if t.Source == nil || !m.Scratch {
			continue
		}
		if rel, ok := strings.CutPrefix(t.Source.File, dotlab.SourceScratchDir); ok {
			spec.Keep = append(spec.Keep, rel)
		}
	}
	return spec
}

// execute runs the entrypoint and logs the command and how it ended.
func (r *Runner) execute(ctx context.Context, log *Log, m *dotlab.Manifest, w *workspace, outDir string) (*sandbox.Result, *captured, error) {
	lim := m.Limits.WithDefaults()
	spec := r.sandboxSpec(m, w)
	log.Info("execute", "command: "+strings.Join(m.Entrypoint, " "), map[string]any{"argv": m.Entrypoint, "cwd": m.Dir(), "env": spec.Env(),
		"runtime": r.runtimeName(), "timeout_seconds": lim.TimeoutSeconds, "memory_mb": lim.MemoryMB, "cpus": lim.CPUs, "scratch": m.Scratch})
	cap, stdio := capture(m)
	res, err := r.Runtime.Run(ctx, spec, outDir, stdio)
	if err != nil {
		return nil, nil, err
	}
	data := map[string]any{"container": res.ID, "exit_code": res.ExitCode, "timed_out": res.TimedOut, "oom_killed": res.OOMKilled,
		"seconds": res.Duration.Seconds(), "output_full": res.OutputFull, "stdout": cap.stdout.String(), "stderr": cap.stderr.String()}
	if left := r.Runtime.Leftovers(res.ID); len(left) > 0 {
		data["leftovers"] = left
		log.Error("execute", "the sandbox left things behind", data)
		return nil, nil, fmt.Errorf("sandbox %s left %s", res.ID, strings.Join(left, ", "))
	}
	level := log.Info
	if res.ExitCode != 0 || res.TimedOut || res.OOMKilled {
		level = log.Warn
	}
	level("execute", fmt.Sprintf("command exited with status %d", res.ExitCode), data)
	return res, cap, nil
}

// runProblems turns how the command ended into a spec_issue, if it should be one.
func runProblems(m *dotlab.Manifest, res *sandbox.Result, stderr string) error {
	lim := m.Limits.WithDefaults()
	var notes []string
	switch {
	case res.TimedOut:
		notes = append(notes, fmt.Sprintf("the entrypoint timed out after limits.timeout_seconds=%d and was killed", lim.TimeoutSeconds))
	case res.OOMKilled:
		notes = append(notes, fmt.Sprintf("the entrypoint was killed for exceeding limits.memory_mb=%d (out of memory; exit status %d)", lim.MemoryMB, res.ExitCode))
	case res.ExitCode != 0:
		notes = append(notes, fmt.Sprintf("the entrypoint exited with status %d; last stderr lines: %s", res.ExitCode, lastLines(stderr)))
		if !m.Scratch && strings.Contains(stderr, "Read-only file system") {
			// The package writes next to its code, which is read-only
			// (docs/manifest-spec.md "scratch").
			notes = append(notes, `the package wrote into a read-only place: a package that writes next to its code needs "scratch": true in its manifest (it then runs in a writable copy at /work/scratch)`)
		}
	}
	if res.OutputFull {
		notes = append(notes, "the output directory reached its size or file cap")
	}
	if res.OverLimit != "" {
		notes = append(notes, res.OverLimit+"; nothing was copied out")
	}
	for _, rj := range res.Rejected {
		notes = append(notes, fmt.Sprintf("%s in the output directory: %s (rejected, not followed)", rj.Type, rj.Path))
	}
	if len(notes) > 0 {
		return issuef("%s", strings.Join(notes, "; "))
	}
	return nil
}

// maxResultsBytes bounds results.json.
const maxResultsBytes = 1 << 20

// readResults reads out/results.json (opened with O_NOFOLLOW) strictly: a
// JSON object whose target keys hold finite numbers, kept as decimal text.
// Keys that are not targets are returned in extra. A target with a source
// may be absent from results.json, and results.json itself may be absent
// when every target has a source (the sources then give every value).
func readResults(outDir string, targets []dotlab.Target) (map[string]dotlab.Decimal, []string, error) {
	f, err := os.OpenFile(filepath.Join(outDir, "results.json"), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		var need []string
		for _, t := range targets {
			if t.Source == nil {
				need = append(need, t.Name)
			}
		}
		if len(need) > 0 {
			return nil, nil, issuef("results.json is missing from the output directory (targets without a source read their value from it: %s)", strings.Join(need, ", "))
		}
		return map[string]dotlab.Decimal{}, nil, nil
	}
	if err != nil {
		return nil, nil, issuef("results.json cannot be opened: %v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, nil, issuef("results.json is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxResultsBytes+1))
	if err != nil {
		return nil, nil, issuef("results.json cannot be read: %v", err)
	}
	if len(data) > maxResultsBytes {
		return nil, nil, issuef("results.json is larger than %d bytes", maxResultsBytes)
	}
	tree, err := strictjson.Parse(data)
	if err != nil {
		return nil, nil, issuef("results.json is malformed: %v", err)
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		return nil, nil, issuef("results.json is malformed: $ must be an object mapping target names to numbers")
	}
	known := map[string]bool{}
	out := map[string]dotlab.Decimal{}
	var probs []string
	for _, t := range targets {
		known[t.Name] = true
		v, ok := obj[t.Name]
		if !ok && t.Source != nil {
			continue // the source gives it
		}
		if !ok {
			probs = append(probs, fmt.Sprintf("$.%s: missing (target %s needs a number)", t.Name, t.Name))
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			probs = append(probs, fmt.Sprintf("$.%s: must be a finite number, got %s", t.Name, jsonKind(v)))
			continue
		}
		d := dotlab.Decimal(n.String())
		if err := d.Validate(); err != nil {
			probs = append(probs, fmt.Sprintf("$.%s: %v", t.Name, err))
			continue
		}
		out[t.Name] = d
	}
	if len(probs) > 0 {
		return nil, nil, issuef("results.json is malformed: %s", strings.Join(probs, "; "))
	}
	var extra []string
	for k := range obj {
		if !known[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	return out, extra, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
