// Package scaffold proposes a replication manifest for a package as it was
// published (`dotlab manifest init`, docs/manifest-spec.md "Scaffolding a
// manifest"): it pins the code (a local git repository's HEAD, a git URL's
// default branch, or an archive to publish), hashes the data files, proposes
// the image by the package's language, proposes each target's tolerance
// as half a unit in the last printed digit of its published value, guesses
// the entrypoint, and validates the result with manifest.Parse. Every field
// it cannot decide gets a placeholder and a Note addressed by JSON path.
package scaffold

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
)

// Options are the inputs of Init: the flags of `dotlab manifest init`.
type Options struct {
	Source     string   // a local package directory or a git URL
	Commit     string   // with a git URL: the commit to pin instead of the default branch's
	Archive    string   // a code archive file to pin by SHA-256 (code.archive)
	DataDir    string   // the data directory; default the package's data/
	DataURL    string   // the URL prefix the data files are published under
	Image      string   // NAME@sha256:… instead of a placeholder
	Entrypoint string   // the command line, split like a shell would
	Title      string   // the claim's title
	Citation   string   // the publication's citation
	Targets    []string // NAME=VALUE, the value as printed in the paper
	Sources    []string // NAME=PLACE:KIND:RULE (see parseSource)
	Downloads  []string // URLs the code fetches while it runs, pinned now (downloads.go)
	Policy     runner.Policy

	// CacheDir is the cache directory (the image store whose --image file
	// lists are read, and the cache of the Debian Contents index); "" for neither.
	CacheDir string
	// AptSources are apt source files (DefaultAptSources) naming the Debian
	// mirror whose Contents index names the package of what the image
	// lacks; nil: the archive is not consulted.
	AptSources []string
	NoArchive  bool         // AptSources are not consulted (--no-archive)
	HTTPClient *http.Client // for the Contents index (nil: the fetch policy's archiveClient)
	// Python and Rscript are the readers' commands ("": python3 and Rscript on PATH).
	Python, Rscript string
}

// Note is one field init could not decide (Kind "placeholder": a value the
// author must replace; the manifest is not valid until they do), decided
// by a guess the author must check (Kind "check"), or something in the code
// that fails in the sandbox as it stands (Kind "warning").
type Note struct {
	Path, Kind, Text string
	standIn          any // a valid value for the placeholder, to validate the rest
}

func (n Note) String() string { return n.Path + ": " + n.Kind + ": " + n.Text }

// Result is the proposed manifest, its notes and its validation.
type Result struct {
	Manifest *dotlab.Manifest
	JSON     []byte // indented, as printed
	Notes    []Note
	// Problems are the validation problems that are not placeholders: with
	// every placeholder replaced by a valid stand-in, manifest.Parse still
	// reports them. Empty when only placeholders are left.
	Problems []string
	// Valid: the manifest as printed passes manifest.Parse (no placeholder left).
	Valid bool
	// NotListable lists the fields a public server would refuse (manifest.CheckListing), when Valid.
	NotListable []string
	// Needs are the modules, R packages and commands the code and the
	// entrypoint need that are not in the language's standard library.
	Needs []Need
	// Findings are the calls and literals that fail (or write) in the sandbox.
	Findings []Finding
	// AptTxt is the apt.txt offered (the package's own plus the Debian
	// packages of what the image lacks); nil when nothing is to be added.
	AptTxt []byte
	// AptTxtInCode: the code as pinned (the commit's tree, or the
	// directory) holds an apt.txt.
	AptTxtInCode bool
}

// Blocking counts the placeholders that fail validation (those with a
// stand-in value); the rest (title, source.citation: free text) do not
// (docs/manifest-spec.md §9), so Placeholders() - Blocking() is their count.
func (r *Result) Blocking() int {
	n := 0
	for _, note := range r.Notes {
		if note.Kind == "placeholder" && note.standIn != nil {
			n++
		}
	}
	return n
}

// Placeholders counts the notes of kind "placeholder".
func (r *Result) Placeholders() int {
	n := 0
	for _, note := range r.Notes {
		if note.Kind == "placeholder" {
			n++
		}
	}
	return n
}

type builder struct {
	opts  Options
	m     *dotlab.Manifest
	notes []Note

	scan       *codeScan // what readCode found; nil when the code was not read
	entryNeeds []need    // what the guessed entrypoint needs
	needs      []Need
	aptTxt     []byte
}

func (b *builder) placeholder(at string, standIn any, format string, args ...any) {
	b.notes = append(b.notes, Note{Path: at, Kind: "placeholder", Text: fmt.Sprintf(format, args...), standIn: standIn})
}

func (b *builder) check(at, format string, args ...any) {
	b.notes = append(b.notes, Note{Path: at, Kind: "check", Text: fmt.Sprintf(format, args...)})
}

func (b *builder) warn(at, format string, args ...any) {
	b.notes = append(b.notes, Note{Path: at, Kind: "warning", Text: fmt.Sprintf(format, args...)})
}

// IsURL tells a git URL from a local directory.
func IsURL(s string) bool {
	return strings.Contains(s, "://")
}

// Init scaffolds a manifest for opts.Source and validates it.
func Init(ctx context.Context, opts Options) (*Result, error) {
	b := &builder{opts: opts, m: &dotlab.Manifest{SpecVersion: dotlab.SpecVersion, Datasets: []dotlab.Dataset{}, Targets: []dotlab.Target{}}}
	b.describe()
	var files []string // the code's file names, slash-separated
	var err error
	if IsURL(opts.Source) {
		files, err = b.remoteCode(ctx)
	} else {
		files, err = b.localCode(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := b.entrypoint(files); err != nil {
		return nil, err
	}
	if err := b.environment(files); err != nil {
		return nil, err
	}
	b.resolveNeeds(ctx)
	b.noteFindings()
	if err := b.targets(); err != nil {
		return nil, err
	}
	if err := b.downloads(ctx); err != nil {
		return nil, err
	}
	return b.result()
}

// describe sets the title and citation, or placeholders for them.
func (b *builder) describe() {
	b.m.Title, b.m.Source.Citation = b.opts.Title, b.opts.Citation
	if b.m.Title == "" {
		b.m.Title = "REPLACE with the claim's title"
		b.placeholder("$.title", nil, "replace with the claim's title, e.g. the paper's main result (or pass --title)")
	}
	if b.m.Source.Citation == "" {
		b.m.Source.Citation = "REPLACE with the publication's full citation"
		b.placeholder("$.source.citation", nil, "replace with the publication's full citation, and add source.doi (or pass --citation)")
	}
}

// localCode pins a local directory: a git repository's HEAD, else an
// archive the author publishes; then hashes its data files.
func (b *builder) localCode(ctx context.Context) ([]string, error) {
	dir, err := filepath.Abs(b.opts.Source)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a package directory or a git URL (a URL has a scheme, e.g. https://)", b.opts.Source)
	}
	var files []string
	var inCode func(string) bool
	if _, gerr := os.Stat(filepath.Join(dir, ".git")); gerr == nil && b.opts.Archive == "" {
		tracked, read, err := b.localGit(dir)
		if err != nil {
			return nil, err
		}
		files, inCode = sortedKeys(tracked), func(p string) bool { return tracked[p] }
		if err := b.readCode(ctx, files, read); err != nil {
			return nil, err
		}
	} else {
		if files, err = walkNames(dir); err != nil {
			return nil, err
		}
		if err := b.archive(); err != nil {
			return nil, err
		}
		if err := b.readCode(ctx, files, dirReader(dir)); err != nil {
			return nil, err
		}
	}
	return files, b.data(filepath.Join(dir, "data"), inCode)
}

// data hashes --data DIR, else the package's data folder.
func (b *builder) data(pkgData string, inCode func(string) bool) error {
	if b.opts.DataDir != "" {
		if _, err := os.Lstat(b.opts.DataDir); err != nil {
			return fmt.Errorf("--data: %w", err)
		}
		return b.proposeDatasets(b.opts.DataDir, "", nil)
	}
	return b.proposeDatasets(pkgData, "data", inCode)
}

// archive proposes code.archive: the author publishes an archive of the
// package; --archive FILE pins its hash.
func (b *builder) archive() error {
	a := &dotlab.Archive{URL: "REPLACE-with-the-https-URL-of-the-code-archive"}
	b.placeholder("$.code.archive.url", "https://standin.invalid/code.tar.gz", "not a git repository: publish the package as a tar.gz or zip (e.g. on Zenodo) and give its https URL; a single top-level folder is stripped (strip_top_folder)")
	if b.opts.Archive != "" {
		sum, err := HashFile(b.opts.Archive)
		if err != nil {
			return fmt.Errorf("--archive: %w", err)
		}
		a.SHA256 = sum
		b.check("$.code.archive.sha256", "the SHA-256 of %s: publish exactly this file", b.opts.Archive)
	} else {
		a.SHA256 = "REPLACE-with-the-sha256-of-the-published-archive"
		b.placeholder("$.code.archive.sha256", strings.Repeat("0", 64), "replace with the SHA-256 of the archive as published (sha256sum FILE, or pass --archive FILE)")
	}
	b.m.Code.Archive = a
	return nil
}

// result marshals the manifest and validates it, as printed and with
// every placeholder replaced by a stand-in.
func (b *builder) result() (*Result, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<digest>" stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(b.m); err != nil {
		return nil, err
	}
	r := &Result{Manifest: b.m, JSON: buf.Bytes(), Notes: b.notes, Needs: b.needs, AptTxt: b.aptTxt, AptTxtInCode: b.scan.hasAptTxt}
	if b.scan != nil {
		r.Findings = b.scan.findings
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}
