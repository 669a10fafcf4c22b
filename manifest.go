package dotlab

// SpecVersion is manifest spec v0.1, the version a manifest that uses none
// of the v0.2 fields declares (and the one scaffolds and the demo write).
const SpecVersion = "0.1"

// SpecVersionRuntime is manifest spec v0.2: v0.1 plus the fields that say
// what a package does while it runs and how it differs from the published
// one: Downloads, Code.Patches and Environment.Env. A runner that knows only
// v0.1 refuses such a manifest (its strict parser refuses unknown fields and
// its schema the version), so no v0.2 field is ever silently ignored.
const SpecVersionRuntime = "0.2"

// SpecVersions lists the manifest spec versions this build validates, oldest
// first (GET /api/v1/status "manifest_spec_versions").
func SpecVersions() []string { return []string{SpecVersion, SpecVersionRuntime} }

// Manifest is a claim's pinned replication manifest, spec v0.1 or v0.2
// (docs/manifest-spec.md; spec/manifest.schema.json). Parse and validate one with manifest.Parse.
type Manifest struct {
	SpecVersion string      `json:"spec_version"`
	Title       string      `json:"title"`
	Source      Source      `json:"source"`
	Datasets    []Dataset   `json:"datasets"`
	Helpers     []Helper    `json:"helpers,omitempty"`
	Downloads   []Download  `json:"downloads,omitempty"` // spec v0.2
	Code        Code        `json:"code"`
	Environment Environment `json:"environment"`
	Seed        *int64      `json:"seed,omitempty"`
	Requires    []string    `json:"requires,omitempty"`
	Entrypoint  []string    `json:"entrypoint"`
	WorkingDir  string      `json:"working_dir,omitempty"`
	Scratch     bool        `json:"scratch,omitempty"`
	Limits      Limits      `json:"limits,omitzero"`
	Targets     []Target    `json:"targets"`
}

// Source cites the publication the claim comes from.
type Source struct {
	Citation string `json:"citation"`
	DOI      string `json:"doi,omitempty"`
	URL      string `json:"url,omitempty"`
}

// Dataset is one input file, pinned by the SHA-256 of its bytes (64
// lowercase hex). It appears read-only at /work/data/<DataPath()>.
type Dataset struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Path   string `json:"path,omitempty"`
}

// DataPath is where the file appears under /work/data: Path, or Name when
// Path is empty.
func (d Dataset) DataPath() string {
	if d.Path != "" {
		return d.Path
	}
	return d.Name
}

// Helper is a small adapter file (a script, an R or Python file) pinned
// by the SHA-256 of its bytes, separately from the datasets. It appears
// read-only at /work/helpers/<HelperPath()> and its hash is recorded in a
// run's input_hashes as "helper:<name>" (HelperInputKey).
type Helper struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Path   string `json:"path,omitempty"`
}

// HelperPath is where the file appears under /work/helpers: Path, or Name
// when Path is empty.
func (h Helper) HelperPath() string {
	if h.Path != "" {
		return h.Path
	}
	return h.Name
}

// HelperInputKey is the key of helper name in a run's input_hashes:
// "helper:<name>" (dataset names cannot contain ':', so the two never meet).
func HelperInputKey(name string) string { return "helper:" + name }

// Download is a file the code fetches by URL while it runs (spec v0.2),
// pinned by the SHA-256 of its bytes (64 lowercase hex). The runner fetches
// and verifies it before the run like a dataset; inside the sandbox, which
// has no network, a local responder answers exactly URL with those bytes.
// Its hash is recorded in a run's input_hashes as "download:<name>"
// (DownloadInputKey).
type Download struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// DownloadInputKey is the key of download name in a run's input_hashes:
// "download:<name>".
func DownloadInputKey(name string) string { return "download:" + name }

// Patch is one of the submitter's declared changes to the published code
// (spec v0.2): a unified diff, applied with zero fuzz to the run's copy of
// the code before the run, and the reason it is needed.
type Patch struct {
	Reason string `json:"reason"`
	Diff   string `json:"diff"`
}

// Code pins the analysis code: either a git Repository at a full 40-hex
// Commit, or an Archive (tar.gz or zip) pinned by SHA-256.
type Code struct {
	Repository string   `json:"repository,omitempty"`
	Commit     string   `json:"commit,omitempty"`
	Archive    *Archive `json:"archive,omitempty"`
	Patches    []Patch  `json:"patches,omitempty"` // spec v0.2
}

// Archive is a code archive (tar.gz or zip of the code tree) and its
// SHA-256. StripTopFolder (default true) says whether a single top-level
// directory (GitHub's and Zenodo's "repo-<sha>/") is stripped.
type Archive struct {
	URL            string `json:"url"`
	SHA256         string `json:"sha256"`
	StripTopFolder *bool  `json:"strip_top_folder,omitempty"`
}

// StripTop reports whether a single top-level folder is stripped (the
// default when strip_top_folder is left out).
func (a Archive) StripTop() bool { return a.StripTopFolder == nil || *a.StripTopFolder }

// Environment pins the container image by digest
// ("registry/repo@sha256:<64 hex>") and records dependency versions for
// provenance (exact versions only; ranges are invalid).
type Environment struct {
	Image        string            `json:"image"`
	Dependencies map[string]string `json:"dependencies,omitempty"`
	// Env (spec v0.2) sets variables the package is configured by, from an
	// allow-list (docs/manifest-spec.md "environment").
	Env map[string]string `json:"env,omitempty"`
}

// ImageDigest returns the "sha256:<hex>" part of Image, or "" when it has none.
func (e Environment) ImageDigest() string {
	for i := len(e.Image) - 1; i >= 0; i-- {
		if e.Image[i] == '@' {
			return e.Image[i+1:]
		}
	}
	return ""
}

// Limits bound the sandboxed run: wall-clock seconds, memory in MiB, CPUs.
type Limits struct {
	TimeoutSeconds int     `json:"timeout_seconds,omitempty"`
	MemoryMB       int     `json:"memory_mb,omitempty"`
	CPUs           float64 `json:"cpus,omitempty"`
}

// Default limits applied where a manifest leaves one out.
const (
	DefaultTimeoutSeconds = 600
	DefaultMemoryMB       = 1024
	DefaultCPUs           = 1.0
)

// WithDefaults fills zero limits with the defaults (600 s, 1024 MiB, 1 CPU).
func (l Limits) WithDefaults() Limits {
	if l.TimeoutSeconds == 0 {
		l.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = DefaultMemoryMB
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultCPUs
	}
	return l
}

// Target is one published number with its tolerance.
type Target struct {
	Name      string    `json:"name"`
	Value     Decimal   `json:"value"`
	Tolerance Tolerance `json:"tolerance"`
	// Source, when set, says where the rerun value comes from when
	// results.json does not give it (results.json wins when it has the key).
	Source *TargetSource `json:"source,omitempty"`
}

// Tolerance says how far a rerun value may be from the published one:
// Type "absolute" (|rerun-published| <= Value) or "relative"
// (|rerun-published| <= Value × |published|).
type Tolerance struct {
	Type  string  `json:"type"`
	Value Decimal `json:"value"`
}

// DefaultScratchWorkingDir is the working directory of a manifest with
// scratch: true that sets none: the writable copy of the code.
const DefaultScratchWorkingDir = "/work/scratch"

// DefaultWorkingDir is the sandbox working directory when a manifest sets none.
const DefaultWorkingDir = "/work/code"

// Dir returns the working directory the entrypoint runs in.
func (m *Manifest) Dir() string {
	if m.WorkingDir != "" {
		return m.WorkingDir
	}
	if m.Scratch {
		return DefaultScratchWorkingDir
	}
	return DefaultWorkingDir
}

// TargetNames returns the names of the manifest's targets, in order.
func (m *Manifest) TargetNames() []string {
	out := make([]string, len(m.Targets))
	for i, t := range m.Targets {
		out[i] = t.Name
	}
	return out
}
