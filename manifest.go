package dotlab

// SpecVersion is the manifest spec version this build validates.
const SpecVersion = "0.1"

// Manifest is a claim's pinned replication manifest, spec v0.1
// (docs/manifest-spec.md; spec/manifest.schema.json). Parse and validate one with manifest.Parse.
type Manifest struct {
	SpecVersion string      `json:"spec_version"`
	Title       string      `json:"title"`
	Source      Source      `json:"source"`
	Datasets    []Dataset   `json:"datasets"`
	Code        Code        `json:"code"`
	Environment Environment `json:"environment"`
	Seed        *int64      `json:"seed,omitempty"`
	Requires    []string    `json:"requires,omitempty"`
	Entrypoint  []string    `json:"entrypoint"`
	WorkingDir  string      `json:"working_dir,omitempty"`
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

// Code pins the analysis code: either a git Repository at a full 40-hex
// Commit, or an Archive (tar.gz or zip) pinned by SHA-256.
type Code struct {
	Repository string   `json:"repository,omitempty"`
	Commit     string   `json:"commit,omitempty"`
	Archive    *Archive `json:"archive,omitempty"`
}

// Archive is a code archive (tar.gz or zip of the code tree) and its SHA-256.
type Archive struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// Environment pins the container image by digest
// ("registry/repo@sha256:<64 hex>") and records dependency versions for
// provenance (exact versions only; ranges are invalid).
type Environment struct {
	Image        string            `json:"image"`
	Dependencies map[string]string `json:"dependencies,omitempty"`
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
}

// Tolerance says how far a rerun value may be from the published one:
// Type "absolute" (|rerun-published| <= Value) or "relative"
// (|rerun-published| <= Value × |published|).
type Tolerance struct {
	Type  string  `json:"type"`
	Value Decimal `json:"value"`
}

// DefaultWorkingDir is the sandbox working directory when a manifest sets none.
const DefaultWorkingDir = "/work/code"

// Dir returns the working directory the entrypoint runs in.
func (m *Manifest) Dir() string {
	if m.WorkingDir != "" {
		return m.WorkingDir
	}
	return DefaultWorkingDir
}
