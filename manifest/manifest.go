// Package manifest parses and validates replication manifests (spec v0.1,
// docs/manifest-spec.md) and computes their canonical identity (SHA-256 of
// the RFC 8785 canonical JSON, docs/manifest-spec.md "5. Canonical identity").
//
// Validation is in three steps, and every problem found is reported with its
// JSON path: strict JSON parsing (strictjson: duplicate or case-variant keys,
// invalid UTF-8, trailing data, depth and size limits), the JSON Schema
// spec/manifest.schema.json (santhosh-tekuri/jsonschema/v6), then the
// semantic rules the schema cannot express (unique names, safe paths, pinned
// dependency versions, relative tolerance on a published zero, …).
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/lazyre"
	"github.com/dotlab/dotlab/internal/netpolicy"
	"github.com/dotlab/dotlab/spec"
	"github.com/dotlab/dotlab/strictjson"
	"github.com/gowebpki/jcs"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxBytes is the largest manifest accepted, in bytes.
const MaxBytes = 256 << 10

// Limits are the strict-JSON limits for manifests.
var Limits = strictjson.Limits{MaxBytes: MaxBytes, MaxDepth: 16}

// Validator validates manifests against the compiled schema. It is safe for
// concurrent use.
type Validator struct {
	schema *jsonschema.Schema
}

// NewValidator compiles spec/manifest.schema.json (its patterns are
// syntax-checked now and compiled on first use: patternEngine).
func NewValidator() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.ManifestSchema))
	if err != nil {
		return nil, fmt.Errorf("manifest schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(patternEngine{}.compile)
	if err := c.AddResource(spec.ManifestSchemaURL, doc); err != nil {
		return nil, fmt.Errorf("manifest schema: %w", err)
	}
	sch, err := c.Compile(spec.ManifestSchemaURL)
	if err != nil {
		return nil, fmt.Errorf("manifest schema: %w", err)
	}
	return &Validator{schema: sch}, nil
}

var defaultValidator = sync.OnceValues(NewValidator)

// Parse validates data with a shared Validator. See Validator.Parse.
func Parse(data []byte) (*dotlab.Manifest, error) {
	v, err := defaultValidator()
	if err != nil {
		return nil, err
	}
	return v.Parse(data)
}

// Parse parses and validates a manifest. On failure it returns a
// *dotlab.Error with code EINVALID whose Detail lists every problem as
// "<JSON path>: <what is wrong and how to fix it>".
func (v *Validator) Parse(data []byte) (*dotlab.Manifest, error) {
	tree, err := strictjson.ParseLimits(data, Limits)
	if err != nil {
		return nil, &dotlab.Error{Code: dotlab.EINVALID, Detail: []string{err.Error()}}
	}
	if err := v.schema.Validate(tree); err != nil {
		verr, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return nil, &dotlab.Error{Code: dotlab.EINVALID, Detail: []string{"$: " + err.Error()}}
		}
		return nil, &dotlab.Error{Code: dotlab.EINVALID, Detail: schemaProblems(verr, tree)}
	}
	var m dotlab.Manifest
	if err := strictjson.DecodeLimits(data, Limits, &m); err != nil {
		return nil, &dotlab.Error{Code: dotlab.EINVALID, Detail: err.(*strictjson.ProblemsError).Problems}
	}
	if err := Check(&m); err != nil {
		return nil, err
	}
	var probs dotlab.Problems
	checkIdentityNumbers(tree, "$", &probs)
	if err := probs.Err(); err != nil {
		return nil, err
	}
	if _, err := Hash(data); err != nil {
		return nil, err
	}
	return &m, nil
}

// checkIdentityNumbers rejects numbers that RFC 8785 would change: the
// canonical form writes each number as its nearest IEEE double, so a number
// with more precision than a double (9007199254740993, 0.10000000000000000001)
// or outside its range (1e400, 1e-400) would share an identity with another
// manifest, or have none. Such a number must be written as the double means
// it, so that the manifest's identity is exact.
func checkIdentityNumbers(node any, path string, p *dotlab.Problems) {
	switch n := node.(type) {
	case map[string]any:
		for _, k := range dotlab.SortedKeys(n) {
			checkIdentityNumbers(n[k], path+jsonPath(node, []string{k})[1:], p)
		}
	case []any:
		for i, v := range n {
			checkIdentityNumbers(v, fmt.Sprintf("%s[%d]", path, i), p)
		}
	case json.Number:
		exact, ok := new(big.Rat).SetString(n.String())
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil || math.IsInf(f, 0) {
			p.Add(path, "%s is beyond the range of IEEE doubles, which the manifest's RFC 8785 identity uses", n)
			return
		}
		back, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if back == nil || back.Cmp(exact) != 0 && exact.IsInt() {
			p.Add(path, "%s is beyond 2^53: integers that large cannot keep their value in the manifest's RFC 8785 identity (IEEE doubles)", n)
		} else if back.Cmp(exact) != 0 {
			p.Add(path, "%s has more precision than an IEEE double: its RFC 8785 identity would be %s; write that, or round the value", n, strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
}

// Hash returns the manifest's canonical identity: the lowercase hex SHA-256
// of its RFC 8785 (JSON Canonicalization Scheme) form. Two manifests that
// differ only in whitespace, key order or number spelling (1.50 vs 1.5) have
// the same hash.
func Hash(data []byte) (string, error) {
	if _, err := strictjson.ParseLimits(data, Limits); err != nil {
		return "", &dotlab.Error{Code: dotlab.EINVALID, Detail: []string{err.Error()}}
	}
	canon, err := jcs.Transform(data)
	if err != nil {
		return "", &dotlab.Error{Code: dotlab.EINVALID, Detail: []string{"$: cannot be canonicalised (RFC 8785): check for lone surrogate escapes (\\ud800) and numbers beyond IEEE double range"}}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

var (
	printer     = message.NewPrinter(language.English)
	namePattern = lazyre.New(`^[A-Za-z0-9_.-]{1,64}$`)
	pinnedRE    = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9.+_:~-]*$`)
	repoRE      = lazyre.New(`^(https?|git|file)://\S+$`)
)

// schemaProblems flattens a schema validation error into one line per leaf
// cause, each addressed by JSON path, sorted and de-duplicated.
func schemaProblems(verr *jsonschema.ValidationError, tree any) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := formHint(e)
			if msg == "" {
				msg = e.ErrorKind.LocalizedString(printer)
			}
			line := jsonPath(tree, e.InstanceLocation) + ": " + msg
			if !seen[line] {
				seen[line] = true
				out = append(out, line)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	sort.Strings(out)
	return out
}

// formHints say what the schema's "exactly one form" rules ask for, in
// place of the keyword that failed (minProperties, maxProperties, or a
// field that dependentSchemas forbids beside another): code is a git
// repository at a commit or an archive, and a target source one place and
// one extractor (docs/manifest-spec.md).
var formHints = []struct{ at, hint string }{
	{"/properties/code/", "give exactly one form: repository and commit (git code), or archive"},
	{"/$defs/source/", "give exactly one place (stream or file) and one extractor (json, csv or regex)"},
}

// versionHint is the message for a v0.2 field in a v0.1 manifest (the
// schema's top-level if/then forbids them with {"not": {}} schemas).
var versionHint = fmt.Sprintf("is a spec v%s field: set \"spec_version\": %q", dotlab.SpecVersionRuntime, dotlab.SpecVersionRuntime)

// formHint returns the hint for a leaf failure of those rules, or "".
func formHint(e *jsonschema.ValidationError) string {
	_, frag, _ := strings.Cut(e.SchemaURL, "#")
	// The v0.1 rule is written {"not": {}} rather than false: OpenAPI
	// tooling (oapi-codegen's kin-openapi) cannot read boolean schemas.
	if _, ok := e.ErrorKind.(*kind.Not); ok && strings.HasPrefix(frag, "/then/") {
		return versionHint
	}
	for _, h := range formHints {
		rest, ok := strings.CutPrefix(frag+"/", h.at)
		if !ok {
			continue
		}
		switch e.ErrorKind.(type) {
		case *kind.MinProperties, *kind.MaxProperties:
			if rest == "" {
				return h.hint
			}
		case *kind.Not:
			if strings.HasPrefix(rest, "dependentSchemas/") {
				return h.hint
			}
		}
	}
	return ""
}

// jsonPath renders a JSON pointer's tokens as "$.a[0].b", using the tree to
// tell array indexes from object keys.
func jsonPath(tree any, tokens []string) string {
	var b strings.Builder
	b.WriteString("$")
	node := tree
	for _, tok := range tokens {
		switch n := node.(type) {
		case []any:
			i, _ := strconv.Atoi(tok)
			fmt.Fprintf(&b, "[%d]", i)
			if i >= 0 && i < len(n) {
				node = n[i]
			} else {
				node = nil
			}
		case map[string]any:
			if namePattern().MatchString(tok) {
				b.WriteString("." + tok)
			} else {
				q, _ := json.Marshal(tok)
				b.WriteString("[" + string(q) + "]")
			}
			node = n[tok]
		default:
			b.WriteString("." + tok)
			node = nil
		}
	}
	return b.String()
}

// Check applies the semantic rules of spec v0.1 that the JSON Schema cannot
// express (docs/manifest-spec.md "3. Semantic rules beyond the schema"). It
// returns nil or an EINVALID *dotlab.Error listing every problem.
func Check(m *dotlab.Manifest) error {
	var p dotlab.Problems
	checkSpecVersion(&p, m)
	checkDatasets(&p, m.Datasets)
	checkHelpers(&p, m.Helpers)
	checkDownloads(&p, m)
	checkRepository(&p, m.Code.Repository)
	checkDependencies(&p, m.Environment.Dependencies)
	checkPatches(&p, m.Code.Patches)
	checkEnv(&p, m.Environment.Env)
	checkEntrypoint(&p, m.Entrypoint)
	checkWorkingDir(&p, m.WorkingDir)
	checkURLs(&p, m)
	targets := map[string]int{}
	for i, t := range m.Targets {
		at := fmt.Sprintf("$.targets[%d]", i)
		if j, dup := targets[t.Name]; dup {
			p.Add(at+".name", "duplicate target name %q (also $.targets[%d]): names must be unique", t.Name, j)
		}
		targets[t.Name] = i
		checkTargetValues(&p, at, t)
		if t.Source != nil {
			checkSource(&p, at+".source", *t.Source, m.Scratch)
		}
	}
	return p.Err()
}

// checkSpecVersion: a known version, and no v0.2 field in a v0.1 manifest
// (the schema refuses those too; this names the fix).
func checkSpecVersion(p *dotlab.Problems, m *dotlab.Manifest) {
	if !slices.Contains(dotlab.SpecVersions(), m.SpecVersion) {
		p.Add("$.spec_version", "must be one of %q", dotlab.SpecVersions())
		return
	}
	if m.SpecVersion != dotlab.SpecVersion {
		return
	}
	need := func(field string) { p.Add(field, "%s", versionHint) }
	if m.Downloads != nil {
		need("$.downloads")
	}
	if m.Code.Patches != nil {
		need("$.code.patches")
	}
	if m.Environment.Env != nil {
		need("$.environment.env")
	}
}

// checkDatasets: unique names, and data paths that are clean, relative,
// unique and never beneath one another.
func checkDatasets(p *dotlab.Problems, datasets []dotlab.Dataset) {
	files := make([]pinnedFile, len(datasets))
	for i, d := range datasets {
		files[i] = pinnedFile{d.Name, d.DataPath()}
	}
	checkPinnedFiles(p, "$.datasets", "dataset", "/work/data", files)
}

// checkHelpers: the same rules for helpers, under /work/helpers.
func checkHelpers(p *dotlab.Problems, helpers []dotlab.Helper) {
	files := make([]pinnedFile, len(helpers))
	for i, h := range helpers {
		files[i] = pinnedFile{h.Name, h.HelperPath()}
	}
	checkPinnedFiles(p, "$.helpers", "helper", "/work/helpers", files)
}

// pinnedFile is a dataset's or helper's name and the path it appears at.
type pinnedFile struct{ name, path string }

// checkPinnedFiles: unique names, and paths that are clean, relative,
// unique and never beneath one another, inside dir.
func checkPinnedFiles(p *dotlab.Problems, field, what, dir string, files []pinnedFile) {
	names := map[string]int{}
	paths := map[string]int{}
	for i, f := range files {
		at := fmt.Sprintf("%s[%d]", field, i)
		if j, dup := names[f.name]; dup {
			p.Add(at+".name", "duplicate %s name %q (also %s[%d]): names must be unique", what, f.name, field, j)
		}
		names[f.name] = i
		if !safeRelPath(f.path) {
			p.Add(at+".path", "%q must be a clean relative path inside %s (no leading /, no . or .. segments, no trailing /)", f.path, dir)
			continue
		}
		if j, dup := paths[f.path]; dup {
			p.Add(at+".path", "path %q is also used by %s[%d]: each %s needs its own path", f.path, field, j, what)
		}
		paths[f.path] = i
	}
	for fp, i := range paths {
		for other, j := range paths {
			if i != j && strings.HasPrefix(other, fp+"/") {
				p.Add(fmt.Sprintf("%s[%d].path", field, i), "%q is a file but %s[%d] puts %q beneath it", fp, field, j, other)
			}
		}
	}
}

// checkRepository: code.repository, when set, is a URL of a known scheme or
// a clean absolute local path.
func checkRepository(p *dotlab.Problems, r string) {
	if r == "" {
		return
	}
	if !repoRE().MatchString(r) && !(strings.HasPrefix(r, "/") && path.Clean(r) == r) {
		p.Add("$.code.repository", "%q must be an https://, http://, git:// or file:// URL, or an absolute local path", r)
	}
}

// checkDependencies: every dependency version is pinned.
func checkDependencies(p *dotlab.Problems, deps map[string]string) {
	for _, k := range dotlab.SortedKeys(deps) {
		v := deps[k]
		if !pinnedVersion(v) {
			p.Add(fmt.Sprintf("$.environment.dependencies[%q]", k), "%q is not a pinned version: give the exact version used (e.g. \"3.11.2\"), not a range, wildcard or latest", v)
		}
	}
}

// checkEntrypoint: no argument contains a NUL character.
func checkEntrypoint(p *dotlab.Problems, args []string) {
	for i, a := range args {
		if strings.ContainsRune(a, 0) {
			p.Add(fmt.Sprintf("$.entrypoint[%d]", i), "must not contain a NUL character")
		}
	}
}

// checkWorkingDir: working_dir, when set, is a clean absolute path outside
// the kernel file systems.
func checkWorkingDir(p *dotlab.Problems, wd string) {
	if wd != "" && (path.Clean(wd) != wd || !strings.HasPrefix(wd, "/")) {
		p.Add("$.working_dir", "%q must be a clean absolute path (e.g. /work/code)", wd)
	}
	for _, bad := range []string{"/proc", "/sys", "/dev"} {
		if wd == bad || strings.HasPrefix(wd, bad+"/") {
			p.Add("$.working_dir", "%q is inside %s, a kernel file system: use a directory such as /work/code", wd, bad)
		}
	}
}

// checkURLs: no URL of the manifest contains a control character.
func checkURLs(p *dotlab.Problems, m *dotlab.Manifest) {
	urls := map[string]string{"$.code.repository": m.Code.Repository, "$.source.url": m.Source.URL}
	if m.Code.Archive != nil {
		urls["$.code.archive.url"] = m.Code.Archive.URL
	}
	for i, d := range m.Datasets {
		urls[fmt.Sprintf("$.datasets[%d].url", i)] = d.URL
	}
	for i, h := range m.Helpers {
		urls[fmt.Sprintf("$.helpers[%d].url", i)] = h.URL
	}
	for i, d := range m.Downloads {
		urls[fmt.Sprintf("$.downloads[%d].url", i)] = d.URL
	}
	for _, at := range dotlab.SortedKeys(urls) {
		if strings.IndexFunc(urls[at], func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			p.Add(at, "contains a control character: give a plain URL")
		}
	}
}

// checkTargetValues: the published value and the tolerance of target t (at
// its JSON path at) are valid decimals within the double range, the
// tolerance is not negative, and a relative tolerance is not on a published 0.
func checkTargetValues(p *dotlab.Problems, at string, t dotlab.Target) {
	pub, err := t.Value.Rat()
	if err != nil {
		p.Add(at+".value", "%v", err)
		return
	}
	tol, err := t.Tolerance.Value.Rat()
	if err != nil {
		p.Add(at+".tolerance.value", "%v", err)
		return
	}
	for _, v := range []struct {
		path string
		r    *big.Rat
	}{{at + ".value", pub}, {at + ".tolerance.value", tol}} {
		if f, _ := v.r.Float64(); math.IsInf(f, 0) {
			p.Add(v.path, "is beyond the range of IEEE doubles (about ±1.8e308), which the manifest's RFC 8785 identity needs")
		}
	}
	if tol.Sign() < 0 {
		p.Add(at+".tolerance.value", "must be >= 0")
	}
	if t.Tolerance.Type == dotlab.ToleranceRelative && pub.Sign() == 0 {
		p.Add(at+".tolerance", "a relative tolerance on a published value of 0 can only match exactly: use an absolute tolerance for this target")
	}
}

// MaxRegex bounds a source's regular expression, in bytes.
const MaxRegex = 1024

// checkSource: a target's source names a clean file under /work/out/ (or
// /work/scratch/ when the manifest sets scratch), and its extractor parses:
// a JSON path of the supported subset, a CSV cell with a column, or an
// RE2 regular expression with at least one group, at most MaxRegex bytes.
func checkSource(p *dotlab.Problems, at string, s dotlab.TargetSource, scratch bool) {
	if f := s.File; f != "" {
		rel, underOut := strings.CutPrefix(f, dotlab.SourceOutDir)
		if !underOut {
			rel, _ = strings.CutPrefix(f, dotlab.SourceScratchDir)
		}
		switch {
		case rel == f || !safeRelPath(rel):
			p.Add(at+".file", "%q must be a clean path of a file under %s or %s (no . or .. segments, no trailing /)", f, dotlab.SourceOutDir, dotlab.SourceScratchDir)
		case !underOut && !scratch:
			p.Add(at+".file", "%q is under %s, which exists only with \"scratch\": true: set it, or read the file from %s", f, dotlab.SourceScratchDir, dotlab.SourceOutDir)
		}
	}
	if s.JSON != "" {
		if _, err := dotlab.ParseJSONPath(s.JSON); err != nil {
			p.Add(at+".json", "%q: %v", s.JSON, err)
		}
	}
	if s.CSV != nil && s.CSV.Column == "" {
		p.Add(at+".csv.column", "must name the header of the column holding the number")
	}
	if s.Regex != "" {
		re, err := regexp.Compile(s.Regex)
		switch {
		case len(s.Regex) > MaxRegex:
			p.Add(at+".regex", "is %d bytes; at most %d", len(s.Regex), MaxRegex)
		case err != nil:
			p.Add(at+".regex", "is not a valid RE2 regular expression (Go regexp syntax): %v", err)
		case re.NumSubexp() < 1:
			p.Add(at+".regex", "needs a group: the number is group 1, e.g. did\\s+([-0-9.eE+]+)")
		}
	}
}

func safeRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || path.Clean(p) != p {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." || seg == "" {
			return false
		}
	}
	return true
}

func pinnedVersion(v string) bool {
	if !pinnedRE().MatchString(v) || strings.EqualFold(v, "latest") {
		return false
	}
	for _, seg := range strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '-' }) {
		if seg == "x" || seg == "X" {
			return false
		}
	}
	return true
}

// CheckListing applies the listing rules to a manifest that Parse accepted:
// every URL a runner would fetch ($.datasets[i].url, $.helpers[i].url, $.downloads[i].url, $.code.repository,
// $.code.archive.url) and the registry host of $.environment.image must be
// one a strict runner fetches, by the very rules runners apply
// (internal/netpolicy, also behind runner.Policy): https only, no file:// or
// local path, no credentials in URLs, no loopback, private, link-local,
// CGNAT, multicast, unspecified, reserved or cloud-metadata address literal
// in any spelling (2130706433, 0x7f.1, [::ffff:127.0.0.1]), no localhost
// name, no plain-http registry. allowPrivate (`dotlab serve
// --allow-private-urls`, a private deployment or the demo) also admits
// private and loopback addresses, plain http and git://; link-local and
// cloud-metadata addresses, file:// and local paths are never listable.
//
// It returns nil or an EINVALID *dotlab.Error whose Detail lists every
// refused field as "<JSON path>: <why>: <fix> (refused by the fetch
// policy)". Names are not resolved: a DNS name that resolves to a private
// address is refused by the runner's dialer when it connects.
func CheckListing(m *dotlab.Manifest, allowPrivate bool) error {
	r := netpolicy.Rules{AllowPrivate: allowPrivate}
	var p dotlab.Problems
	add := func(err error) {
		if err != nil {
			p = append(p, err.Error())
		}
	}
	for i, d := range m.Datasets {
		_, err := r.URL(fmt.Sprintf("$.datasets[%d].url", i), d.URL)
		add(err)
	}
	for i, h := range m.Helpers {
		_, err := r.URL(fmt.Sprintf("$.helpers[%d].url", i), h.URL)
		add(err)
	}
	for i, d := range m.Downloads {
		_, err := r.URL(fmt.Sprintf("$.downloads[%d].url", i), d.URL)
		add(err)
	}
	if m.Code.Repository != "" {
		_, err := r.URL("$.code.repository", m.Code.Repository)
		add(err)
	}
	if m.Code.Archive != nil {
		_, err := r.URL("$.code.archive.url", m.Code.Archive.URL)
		add(err)
	}
	add(r.ImageRef("$.environment.image", m.Environment.Image))
	return p.Err()
}
