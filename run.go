package dotlab

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Outcome is a run's result (docs/protocol.md §6).
type Outcome string

// The four outcomes.
const (
	OutcomeReproduced    Outcome = "reproduced"     // every target within tolerance
	OutcomeNotReproduced Outcome = "not_reproduced" // at least one target outside tolerance
	OutcomeSpecIssue     Outcome = "spec_issue"     // the spec cannot be executed as written
	OutcomeInputMismatch Outcome = "input_mismatch" // an input hash does not match the manifest
)

// Outcomes lists the valid outcomes in their documented order.
var Outcomes = []Outcome{OutcomeReproduced, OutcomeNotReproduced, OutcomeSpecIssue, OutcomeInputMismatch}

// Valid reports whether o is one of the four outcomes.
func (o Outcome) Valid() bool {
	for _, v := range Outcomes {
		if o == v {
			return true
		}
	}
	return false
}

// Compared reports whether o comes from comparing targets (reproduced or
// not_reproduced) and so opens a challenge window; spec_issue and
// input_mismatch settle at once.
func (o Outcome) Compared() bool {
	return o == OutcomeReproduced || o == OutcomeNotReproduced
}

// RunBody is the body of POST /runs (docs/protocol.md §6) and, within
// ChallengeBody, of POST /challenges. It is also what `dotlab rerun` writes
// as run.json (JobID empty when local).
type RunBody struct {
	JobID        string            `json:"job_id"`
	InputHashes  map[string]string `json:"input_hashes"`
	OutputHashes map[string]string `json:"output_hashes"`
	// OutputListing, when present, pins the output listing uploaded
	// beforehand with PUT /jobs/{id}/outputs, which holds every output's
	// hash; output_hashes then keeps only results.json and the streams
	// (docs/protocol.md §6 "Output listing"). Absent for listings that fit
	// inline: what the skill text describes.
	OutputListing *OutputListing  `json:"output_listing,omitempty"`
	Environment   RunEnvironment  `json:"environment"`
	Comparisons   []RunComparison `json:"comparisons"`
	Outcome       Outcome         `json:"outcome"`
	LogsURI       string          `json:"logs_uri,omitempty"`
	// LogsSHA256 is the SHA-256 (64 lowercase hex) of the logs.jsonl the
	// runner will upload with PUT /jobs/{id}/logs: only those exact bytes
	// are accepted afterwards (docs/protocol.md §6 "Logs"). Optional: a run
	// without it can have no logs attached.
	LogsSHA256 string `json:"logs_sha256,omitempty"`
	Notes      string `json:"notes,omitempty"`
	// Uncompared keeps, for a spec_issue run whose entrypoint ran but did
	// not finish as required (non-zero exit, timeout, killed), the value
	// each target's source could still read: evidence, marked not
	// compared (UncomparedValue). Absent otherwise.
	Uncompared []UncomparedValue `json:"uncompared,omitempty"`
	// Envelope, when present, signs this body (without the envelope) as
	// the predicate of an in-toto Statement (docs/verification.md "Signed
	// records"); absent, the record is unsigned.
	Envelope *Envelope `json:"envelope,omitempty"`
}

// RunEnvironment records the environment actually used.
type RunEnvironment struct {
	ImageDigest string `json:"image_digest"`
	Seed        *int64 `json:"seed,omitempty"`
	// Runtime is the OCI runtime build that executed the analysis; absent
	// from runners that do not report it.
	Runtime *RuntimeInfo `json:"runtime,omitempty"`
	// CodeCommit (git code) or CodeArchiveSHA256 (archive code) is the code
	// the run executed, beside the image digest; absent from runners that
	// do not report it. When present it must be the manifest's.
	CodeCommit        string `json:"code_commit,omitempty"`
	CodeArchiveSHA256 string `json:"code_archive_sha256,omitempty"`
	// CodeTreeSHA256 is the hash of the code tree the run executed after
	// the manifest's code.patches were applied (runner.TreeSHA256;
	// docs/manifest-spec.md "code.patches"); absent without patches and
	// from runners that do not report it. Evidence: the server checks its
	// form only (it has no copy of the code).
	CodeTreeSHA256 string `json:"code_tree_sha256,omitempty"`
}

// RuntimeInfo identifies the OCI runtime build of a run (docs/sandbox.md
// "The runtime's own version"). Its fields are those of
// sandbox.RuntimeVersion, which converts to it directly.
type RuntimeInfo struct {
	// Name is the runtime, e.g. "runc" or "runsc".
	Name string `json:"name"`
	// Version is what `NAME --version` prints, e.g. "1.1.5+ds1".
	Version string `json:"version"`
	// Commit is the "commit:" line, e.g. "1.1.5+ds1-1+deb12u1".
	Commit string `json:"commit,omitempty"`
	// Spec is the runtime-spec version the binary implements, e.g. "1.0.2-dev".
	Spec string `json:"spec,omitempty"`
	// Package and PackageVersion are the dpkg package that installed the
	// binary, e.g. "runc" and "1.1.5+ds1-1+deb12u1".
	Package        string `json:"package,omitempty"`
	PackageVersion string `json:"package_version,omitempty"`
	// Fixes lists the runtime CVEs whose fix the build carries, e.g.
	// ["CVE-2024-21626"].
	Fixes []string `json:"fixes,omitempty"`
}

// Has reports whether v carries the fix for cve.
func (v RuntimeInfo) Has(cve string) bool {
	for _, f := range v.Fixes {
		if f == cve {
			return true
		}
	}
	return false
}

// String is "runc 1.1.5+ds1 (commit 1.1.5+ds1-1+deb12u1, package runc 1.1.5+ds1-1+deb12u1)".
func (v RuntimeInfo) String() string {
	s := v.Name + " " + v.Version
	var extra []string
	if v.Commit != "" {
		extra = append(extra, "commit "+v.Commit)
	}
	if v.Package != "" {
		extra = append(extra, "package "+v.Package+" "+v.PackageVersion)
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// Bounds of RuntimeInfo, as in spec/openapi.yaml RuntimeInfo.
const (
	MaxRuntimeField = 128 // bytes of each string field
	MaxRuntimeFixes = 16  // entries of fixes
)

var (
	runtimeNameRE = lazyRegexp(`^[a-z0-9][a-z0-9._-]{0,31}$`)
	cveRE         = lazyRegexp(`^CVE-[0-9]{4}-[0-9]{4,7}$`)
)

// check adds a problem under $.environment.runtime for each field that is
// out of bounds: name 1-32 of [a-z0-9._-]; version required; every string
// at most MaxRuntimeField bytes of printable ASCII without spaces; fixes at
// most MaxRuntimeFixes distinct CVE ids (CVE-YYYY-NNNN).
func (ri *RuntimeInfo) check(p *Problems) {
	if ri == nil {
		return
	}
	const at = "$.environment.runtime"
	if !runtimeNameRE().MatchString(ri.Name) {
		p.Add(at+".name", "must be 1-32 characters of a-z, 0-9, '.', '_', '-' (e.g. runc)")
	}
	if ri.Version == "" {
		p.Add(at+".version", "required: what the runtime's --version prints")
	}
	for _, f := range []struct{ name, v string }{
		{"version", ri.Version}, {"commit", ri.Commit}, {"spec", ri.Spec},
		{"package", ri.Package}, {"package_version", ri.PackageVersion},
	} {
		if len(f.v) > MaxRuntimeField {
			p.Add(at+"."+f.name, "is %d bytes; at most %d", len(f.v), MaxRuntimeField)
			continue
		}
		if strings.IndexFunc(f.v, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			p.Add(at+"."+f.name, "must be printable ASCII without spaces")
		}
	}
	if len(ri.Fixes) > MaxRuntimeFixes {
		p.Add(at+".fixes", "has %d entries; at most %d", len(ri.Fixes), MaxRuntimeFixes)
		return
	}
	seen := map[string]bool{}
	for i, c := range ri.Fixes {
		switch {
		case !cveRE().MatchString(c):
			p.Add(fmt.Sprintf("%s.fixes[%d]", at, i), "must be a CVE id like CVE-2024-21626")
		case seen[c]:
			p.Add(fmt.Sprintf("%s.fixes[%d]", at, i), "duplicate %s", c)
		}
		seen[c] = true
	}
}

// RunComparison is one rerun value as submitted. Published, Tolerance and
// Match are optional (the dotsci draft sends them); when present the server
// checks them against its own computation instead of trusting them.
type RunComparison struct {
	Name      string  `json:"name"`
	Rerun     Decimal `json:"rerun"`
	Published Decimal `json:"published,omitempty"`
	Tolerance Decimal `json:"tolerance,omitempty"`
	Match     *bool   `json:"match,omitempty"`
}

// Run is a published official run as the server stores it: the submitted
// body, the comparisons the server recomputed, and where the claim stands.
type Run struct {
	ID          string       `json:"id"`
	ClaimID     string       `json:"claim_id"`
	RunnerID    string       `json:"runner_id"`
	Outcome     Outcome      `json:"outcome"`
	Comparisons []Comparison `json:"comparisons"`
	Body        RunBody      `json:"body"`
	Status      ClaimState   `json:"status"`
	PublishedAt time.Time    `json:"published_at"`
	// ChallengeDeadline is when the challenge window closes (compared outcomes only).
	ChallengeDeadline *time.Time `json:"challenge_deadline,omitempty"`

	// How the claim settled against this run (docs/protocol.md §6 "The run
	// record"). SettledOutcome is the claim's final outcome, once settled;
	// Overturned is true when it differs from the run's own Outcome (only
	// after a dispute the challenger side won). DisputeID is the dispute (the
	// claim id) once a challenge disagreed with the run; OverturnedBy is the
	// disagreeing challenge whose outcome the claim settled with.
	SettledOutcome Outcome `json:"settled_outcome,omitempty"`
	Overturned     bool    `json:"overturned"`
	DisputeID      string  `json:"dispute_id,omitempty"`
	OverturnedBy   string  `json:"overturned_by,omitempty"`

	// The run's logs (docs/protocol.md §6 "Logs", "Log coverage"):
	// LogsSHA256 is the hash the run body pinned, LogsUploadedAt when the
	// matching logs.jsonl arrived, LogCoverage the server's check of it
	// against the run (present once uploaded).
	LogsSHA256     string       `json:"logs_sha256,omitempty"`
	LogsUploadedAt *time.Time   `json:"logs_uploaded_at,omitempty"`
	LogCoverage    *LogCoverage `json:"log_coverage,omitempty"`

	// SignedBy is the key id of the envelope (Body.Envelope) the server
	// verified against the runner's registered key; absent when the run is
	// unsigned (docs/verification.md "Signed records").
	SignedBy string `json:"signed_by,omitempty"`
}

var (
	sha256RE = lazyRegexp(`^[0-9a-f]{64}$`)
	commitRE = lazyRegexp(`^[0-9a-f]{40}$`)
	digestRE = lazyRegexp(`^sha256:[0-9a-f]{64}$`)
)

// MaxNotes is the longest notes text accepted on a run or challenge, in bytes.
const MaxNotes = 20000

// EvaluateRun checks a submitted run body against the claim's manifest and
// recomputes every comparison (docs/protocol.md §6 "What the server checks"):
//   - one rerun value per target (missing, unknown or duplicate names are invalid);
//   - optional published/tolerance/match fields must agree with the manifest;
//   - the declared outcome must equal the recomputed one (else outcome_mismatch);
//   - reproduced/not_reproduced must show every dataset's and helper's
//     manifest hash (helpers under "helper:<name>") and the manifest's image
//     digest; input_mismatch must show at least one dataset hash that
//     differs; spec_issue and input_mismatch need notes;
//   - a code commit or code archive hash, when reported, must be the manifest's.
//
// It returns the comparisons computed by the server (empty for spec_issue and
// input_mismatch) or an *Error with code EINVALID or EOUTCOMEMISMATCH whose
// detail names every field to fix.
func EvaluateRun(m *Manifest, b *RunBody) ([]Comparison, error) {
	p := b.formProblems()
	if !b.Outcome.Valid() {
		return nil, p.Err()
	}
	cs, outcome, decided := b.evaluate(m, &p)
	if err := p.Err(); err != nil || !decided {
		return nil, err
	}
	if outcome != b.Outcome {
		detail := []string{fmt.Sprintf("$.outcome: declared %s but the comparisons give %s", b.Outcome, outcome)}
		detail = append(detail, DescribeMismatches(cs)...)
		return nil, &Error{Code: EOUTCOMEMISMATCH, Detail: detail}
	}
	return cs, nil
}

// ManifestProblems lists the problems of run body b against manifest m,
// for a body whose own problems (Problems) are known already, so that one
// answer names them all: the code, inputs, image and seed, the targets,
// the declared fields; a missing or unknown outcome is judged as a
// compared one, and the outcome the comparisons give is named; a declared
// outcome they do not give is one more problem.
func ManifestProblems(m *Manifest, b *RunBody) Problems {
	var p Problems
	_, outcome, decided := b.evaluate(m, &p)
	switch {
	case decided && !b.Outcome.Valid():
		p.Add("$.outcome", "your comparisons give %s under the manifest's tolerances", outcome)
	case decided && outcome != b.Outcome:
		p.Add("$.outcome", "declared %s but the comparisons give %s", b.Outcome, outcome)
	}
	return p
}

// evaluate checks b against m, adding to p, and decides the comparisons
// of a compared outcome (or of an outcome not given): decided is false
// when b's outcome compares nothing or its values cannot be compared.
// The comparisons are decided even when the inputs or seed are wrong, so
// that one answer names every problem of the body.
func (b *RunBody) evaluate(m *Manifest, p *Problems) (cs []Comparison, outcome Outcome, decided bool) {
	b.checkCode(m, p)
	b.checkUncomparedValues(m, p)
	if b.Outcome.Valid() && !b.Outcome.Compared() {
		b.checkUncompared(m, p)
		return nil, "", false
	}
	b.checkPinned(m, p)
	rerun, byName, valid := b.rerunValues()
	if !valid {
		return nil, "", false // formProblems named the values
	}
	cs, outcome, err := Decide(m.Targets, rerun)
	if err != nil {
		for _, d := range ErrorLines(err) {
			p.Add("$.comparisons", "%s", d)
		}
		return nil, "", false
	}
	checkDeclared(cs, byName, p)
	return cs, outcome, true
}

// Problems lists every problem of a run body that can be found without
// its claim (no manifest, no database), each as "path: what to fix": the
// job_id, the outcome, the forms of hashes, URLs, digests and runtime, and
// the comparisons' names and rerun values. EvaluateRun checks these again
// and then the body against the manifest.
func (b *RunBody) Problems() Problems {
	var p Problems
	if b.JobID == "" {
		p.Add("$.job_id", "required: the claim id of your job, e.g. DL-0001")
	}
	return append(p, b.formProblems()...)
}

// formProblems is Problems without the job_id (a challenge names its run
// by claim_id or run_id).
func (b *RunBody) formProblems() Problems {
	var p Problems
	if !b.Outcome.Valid() {
		p.Add("$.outcome", "must be one of reproduced, not_reproduced, spec_issue, input_mismatch")
	}
	b.checkForm(&p)
	if b.Outcome.Valid() && !b.Outcome.Compared() {
		return p // a spec_issue or input_mismatch run's comparisons are not judged
	}
	for i, c := range b.Comparisons {
		path := fmt.Sprintf("$.comparisons[%d]", i)
		switch {
		case c.Name == "":
			p.Add(path+".name", "required: the target name")
		case c.Rerun == "":
			p.Add(path+".rerun", "must be a finite number")
		default:
			if err := c.Rerun.Validate(); err != nil {
				p.Add(path+".rerun", "%v", err)
			}
		}
	}
	for _, d := range b.duplicateNames() {
		p.Add(fmt.Sprintf("$.comparisons[%d].name", d), "duplicate target %q: give one rerun value per target", b.Comparisons[d].Name)
	}
	return p
}

// duplicateNames are the indexes of comparisons whose name an earlier one has.
func (b *RunBody) duplicateNames() []int {
	var dups []int
	seen := map[string]bool{}
	for i, c := range b.Comparisons {
		if c.Name != "" && seen[c.Name] {
			dups = append(dups, i)
		}
		seen[c.Name] = true
	}
	return dups
}

// checkForm checks what every outcome must satisfy: notes length, hash,
// logs URL, logs hash and digest forms, the runtime. The logs URL is checked for its
// form only (http or https, a host, at most 2000 characters); which
// schemes and hosts a server takes is its URL policy (httpapi: https only,
// unless the operator allows private URLs; docs/protocol.md §6).
func (b *RunBody) checkForm(p *Problems) {
	if len(b.Notes) > MaxNotes {
		p.Add("$.notes", "is %d bytes; at most %d", len(b.Notes), MaxNotes)
	}
	for name, h := range b.InputHashes {
		if !sha256RE().MatchString(h) {
			p.Add(fmt.Sprintf("$.input_hashes[%q]", name), "must be 64 lowercase hex characters (a SHA-256)")
		}
	}
	for name, h := range b.OutputHashes {
		if !sha256RE().MatchString(h) {
			p.Add(fmt.Sprintf("$.output_hashes[%q]", name), "must be 64 lowercase hex characters (a SHA-256)")
		}
	}
	b.OutputListing.check(b.OutputHashes, p)
	if b.LogsURI != "" {
		if u, err := url.Parse(b.LogsURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(b.LogsURI) > 2000 {
			p.Add("$.logs_uri", "must be an absolute https:// URL of your full logs (at most 2000 characters)")
		}
	}
	if b.LogsSHA256 != "" && !sha256RE().MatchString(b.LogsSHA256) {
		p.Add("$.logs_sha256", "must be 64 lowercase hex characters: the SHA-256 of the logs.jsonl you upload with %s", Go(StepUploadLogs, "{id}"))
	}
	if b.Environment.ImageDigest != "" && !digestRE().MatchString(b.Environment.ImageDigest) {
		p.Add("$.environment.image_digest", "must be sha256:<64 lowercase hex>")
	}
	b.Environment.Runtime.check(p)
	if c := b.Environment.CodeCommit; c != "" && !commitRE().MatchString(c) {
		p.Add("$.environment.code_commit", "must be a full commit id, 40 lowercase hex characters")
	}
	if h := b.Environment.CodeArchiveSHA256; h != "" && !sha256RE().MatchString(h) {
		p.Add("$.environment.code_archive_sha256", "must be 64 lowercase hex characters (a SHA-256)")
	}
	if h := b.Environment.CodeTreeSHA256; h != "" && !sha256RE().MatchString(h) {
		p.Add("$.environment.code_tree_sha256", "must be 64 lowercase hex characters (a SHA-256)")
	}
}

// checkCode checks a reported code commit or archive hash against the
// manifest's code (any outcome: a runner reports what it fetched).
func (b *RunBody) checkCode(m *Manifest, p *Problems) {
	env := b.Environment
	switch {
	case env.CodeCommit != "" && m.Code.Archive != nil:
		p.Add("$.environment.code_commit", "the manifest pins a code archive, not a commit: report code_archive_sha256")
	case env.CodeCommit != "" && env.CodeCommit != m.Code.Commit:
		p.Add("$.environment.code_commit", "is %s but the manifest pins commit %s", env.CodeCommit, m.Code.Commit)
	}
	switch {
	case env.CodeArchiveSHA256 != "" && m.Code.Archive == nil:
		p.Add("$.environment.code_archive_sha256", "the manifest pins a commit, not an archive: report code_commit")
	case env.CodeArchiveSHA256 != "" && b.Outcome.Compared() && env.CodeArchiveSHA256 != m.Code.Archive.SHA256:
		p.Add("$.environment.code_archive_sha256", "is %s but the manifest pins %s", env.CodeArchiveSHA256, m.Code.Archive.SHA256)
	}
}

// checkUncompared checks a spec_issue or input_mismatch run: notes, a
// differing input for input_mismatch, input names.
func (b *RunBody) checkUncompared(m *Manifest, p *Problems) {
	if strings.TrimSpace(b.Notes) == "" {
		p.Add("$.notes", "is required for %s: say plainly what could not be run or which input differed", b.Outcome)
	}
	if b.Outcome == OutcomeInputMismatch {
		differs := false
		for _, d := range m.Datasets {
			if h, ok := b.InputHashes[d.Name]; ok && h != d.SHA256 {
				differs = true
			}
		}
		if !differs && !m.downloadDiffers(b.InputHashes) {
			p.Add("$.input_hashes", "input_mismatch must show at least one dataset or download whose hash differs from the manifest's")
		}
	}
	b.checkInputNames(m, p)
}

func (b *RunBody) checkInputNames(m *Manifest, p *Problems) {
	for name := range b.InputHashes {
		if !m.hasDataset(name) && !m.hasHelperKey(name) && !m.hasDownloadKey(name) {
			p.Add(fmt.Sprintf("$.input_hashes[%q]", name), "is not a dataset of this manifest, nor \"helper:<name>\" of one of its helpers, nor \"download:<name>\" of one of its downloads")
		}
	}
}

// checkPinned checks that a compared run used the manifest's inputs, image
// and seed. A manifest without a seed takes a run without one, or with
// seed 0: the skill's example run body prints "seed": 0, and a run of a
// manifest that sets no seed passes no seed to the analysis (docs/protocol.md
// "How DotLab reads the skill").
func (b *RunBody) checkPinned(m *Manifest, p *Problems) {
	for _, d := range m.Datasets {
		h, ok := b.InputHashes[d.Name]
		switch {
		case !ok:
			p.Add("$.input_hashes", "missing dataset %q: a %s run must show the hash of every input", d.Name, b.comparedKind())
		case h != d.SHA256:
			p.Add(fmt.Sprintf("$.input_hashes[%q]", d.Name), "is %s but the manifest pins %s: publish input_mismatch instead", h, d.SHA256)
		}
	}
	for _, h := range m.Helpers {
		key := HelperInputKey(h.Name)
		got, ok := b.InputHashes[key]
		switch {
		case !ok:
			p.Add("$.input_hashes", "missing helper %q (key %q): a %s run must show the hash of every helper", h.Name, key, b.comparedKind())
		case got != h.SHA256:
			p.Add(fmt.Sprintf("$.input_hashes[%q]", key), "is %s but the manifest pins %s: publish spec_issue instead", got, h.SHA256)
		}
	}
	b.checkPinnedDownloads(m, p)
	b.checkInputNames(m, p)
	if want := m.Environment.ImageDigest(); b.Environment.ImageDigest != want {
		p.Add("$.environment.image_digest", "is %q but the manifest pins %s", b.Environment.ImageDigest, want)
	}
	switch got := b.Environment.Seed; {
	case m.Seed != nil && got == nil:
		p.Add("$.environment.seed", "missing: the manifest sets seed %d", *m.Seed)
	case m.Seed != nil && *got != *m.Seed:
		p.Add("$.environment.seed", "is %d but the manifest sets %d", *got, *m.Seed)
	case m.Seed == nil && got != nil && *got != 0:
		p.Add("$.environment.seed", "is %d but the manifest sets no seed: leave it out (or give 0, as the skill's example body does)", *got)
	}
}

// comparedKind names the run's outcome in a problem of a compared run:
// its outcome, or "reproduced or not_reproduced" when it gave none valid.
func (b *RunBody) comparedKind() string {
	if !b.Outcome.Valid() {
		return "reproduced or not_reproduced"
	}
	return string(b.Outcome)
}

// rerunValues collects the rerun value of each named target; valid is
// false when a name or value is missing, invalid or repeated
// (formProblems names each).
func (b *RunBody) rerunValues() (rerun map[string]Decimal, byName map[string]RunComparison, valid bool) {
	rerun = make(map[string]Decimal, len(b.Comparisons))
	byName = make(map[string]RunComparison, len(b.Comparisons))
	for _, c := range b.Comparisons {
		if _, dup := rerun[c.Name]; dup || c.Name == "" || c.Rerun == "" || c.Rerun.Validate() != nil {
			return nil, nil, false
		}
		rerun[c.Name] = c.Rerun
		byName[c.Name] = c
	}
	return rerun, byName, true
}

// checkDeclared checks the optional published, tolerance and match fields
// a submission declared against the server's comparisons.
func checkDeclared(cs []Comparison, byName map[string]RunComparison, p *Problems) {
	for _, c := range cs {
		sub := byName[c.Name]
		path := fmt.Sprintf("$.comparisons[name=%s]", c.Name)
		if sub.Published != "" && !sameNumber(sub.Published, c.Published) {
			p.Add(path+".published", "is %s but the manifest's target is %s", sub.Published, c.Published)
		}
		if sub.Tolerance != "" && !sameNumber(sub.Tolerance, c.Tolerance) {
			p.Add(path+".tolerance", "is %s but the manifest's tolerance is %s", sub.Tolerance, c.Tolerance)
		}
		if sub.Match != nil && *sub.Match != c.Match {
			p.Add(path+".match", "is %v but the difference %s against allowed %s gives %v", *sub.Match, c.Difference, c.Allowed, c.Match)
		}
	}
}

func (m *Manifest) hasDataset(name string) bool {
	for _, d := range m.Datasets {
		if d.Name == name {
			return true
		}
	}
	return false
}

func (m *Manifest) hasHelperKey(key string) bool {
	for _, h := range m.Helpers {
		if HelperInputKey(h.Name) == key {
			return true
		}
	}
	return false
}

func sameNumber(a, b Decimal) bool {
	x, err1 := a.Rat()
	y, err2 := b.Rat()
	return err1 == nil && err2 == nil && x.Cmp(y) == 0
}

// SortedKeys returns the keys of a string map in order (for stable output).
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RunListing is a run as GET /runs lists it (docs/protocol.md §6 "Listing
// runs"): what a challenger needs to choose a run and rerun its manifest,
// and none of the runner's values. It has no comparisons, hashes,
// environment, notes or logs_uri, so that a challenger can list runs and
// still not read the runner's run before it has its own result
// (agent-skill "Challenger workflow" step 2). The run with its values is
// GET /runs/{id} (RunURL).
type RunListing struct {
	ID      string `json:"id"`
	ClaimID string `json:"claim_id"`
	// Title and Requires are the claim's (the manifest's title and the
	// capabilities its rerun needs).
	Title    string   `json:"title"`
	Requires []string `json:"requires"`
	// Outcome is the outcome the run declared; Status is the claim's state.
	Outcome     Outcome    `json:"outcome"`
	Status      ClaimState `json:"status"`
	PublishedAt time.Time  `json:"published_at"`
	// ChallengeDeadline is when the challenge window closes (compared outcomes only).
	ChallengeDeadline *time.Time `json:"challenge_deadline,omitempty"`
	// SettledOutcome is the claim's final outcome once settled; Overturned
	// says it differs from the run's own Outcome (a dispute sided with the
	// challenger). Outcomes only: no values (GET /runs/{id} has them).
	SettledOutcome Outcome `json:"settled_outcome,omitempty"`
	Overturned     bool    `json:"overturned"`
	// ManifestURL is the manifest exactly as submitted (what to rerun);
	// RunURL the full run, values included.
	ManifestURL string `json:"manifest_url"`
	RunURL      string `json:"run_url"`
	// YouMayChallenge and Reason are set only for a caller that sent its
	// API key: whether it may challenge the run now, and when not, why (a
	// role it holds on the claim, a challenge of its own, the window).
	YouMayChallenge *bool  `json:"you_may_challenge,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

// RunService publishes and finds official runs.
type RunService interface {
	// PublishRun records the assigned runner's run after EvaluateRun passes
	// (package protocol implements it).
	PublishRun(ctx context.Context, runner *Agent, body *RunBody, raw []byte) (*Run, error)
	FindRun(ctx context.Context, id string) (*Run, error)
	// FindRuns lists runs without their values (RunListing).
	FindRuns(ctx context.Context, p Page) ([]*RunListing, error)
}
