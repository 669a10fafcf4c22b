package imagebuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/internal/lazyre"
	"github.com/dotlab/dotlab/internal/safefs"
)

// Bounds of the repo2docker files: larger ones are refused.
const (
	MaxPackageFileBytes = 256 << 10
	MaxPackages         = 1000
)

// Defaults of the repositories a repo2docker build installs from.
const (
	DefaultDebianMirror = "http://deb.debian.org/debian"
	DefaultPipIndex     = "https://pypi.org/simple"
	DefaultCRAN         = "https://cloud.r-project.org"
	// VenvDir is where requirements.txt is installed (a virtual
	// environment that also sees the image's Debian Python packages).
	VenvDir = "/opt/venv"
)

// PackageFiles are the repo2docker files of a replication package
// (https://repo2docker.readthedocs.io "Configuration files", the subset
// DotLab reads): apt.txt (Debian packages), requirements.txt (pip, every
// requirement pinned with ==/=== and --hash), install.R (R code run with the
// configured CRAN-like repository) and DESCRIPTION (its Depends and
// Imports installed from it).
type PackageFiles struct {
	// Dir is where the files were found: the package, or its binder/ or
	// .binder/ directory, which repo2docker reads instead when present.
	Dir          string
	Apt          []string
	Requirements []byte
	InstallR     []byte
	RPackages    []string
}

// unsupportedFiles are repo2docker files DotLab does not read: each is
// refused with a pointer to a Containerfile.
var unsupportedFiles = []string{"environment.yml", "environment.yaml", "Pipfile", "Pipfile.lock", "setup.py",
	"Project.toml", "Manifest.toml", "REQUIRE", "runtime.txt", "postBuild", "start", "default.nix", "apt.txt.lock"}

// ReadPackageFiles reads and checks the repo2docker files of the package
// in dir. A package with a Containerfile or Dockerfile, with a file DotLab
// does not read (environment.yml, Pipfile, runtime.txt, postBuild, …) or
// with none of the four is refused, naming the file and the fix. Every
// file is read inside dir (an os.Root): a symbolic link — binder/ or
// .binder/ itself, or a file in it — is refused, never followed.
func ReadPackageFiles(dir string) (*PackageFiles, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	defer root.Close()
	p := &PackageFiles{Dir: dir}
	sub := "."
	for _, d := range []string{"binder", ".binder"} {
		fi, err := root.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: a symbolic link: %w (make %s a directory of the package)", filepath.Join(dir, d), ErrRefused, d)
		}
		if fi.IsDir() {
			p.Dir, sub = filepath.Join(dir, d), d
			break
		}
	}
	for _, name := range append([]string{"Containerfile", "Dockerfile"}, unsupportedFiles...) {
		if _, err := root.Lstat(path.Join(sub, name)); err == nil {
			return nil, fmt.Errorf("%s: %w: DotLab reads apt.txt, requirements.txt, install.R and DESCRIPTION only; "+
				"write a Containerfile FROM NAME@sha256:<64 hex> and build it with `dotlab image build --containerfile`", filepath.Join(p.Dir, name), ErrRefused)
		}
	}
	read := func(name string, into *[]byte) {
		if err == nil {
			*into, err = readBounded(root, sub, name, p.Dir)
		}
	}
	var apt, desc []byte
	read("apt.txt", &apt)
	read("requirements.txt", &p.Requirements)
	read("install.R", &p.InstallR)
	read("DESCRIPTION", &desc)
	if err != nil {
		return nil, err
	}
	return p, p.check(dir, apt, desc)
}

// check parses and checks the files ReadPackageFiles read.
func (p *PackageFiles) check(dir string, apt, desc []byte) error {
	var err error
	if p.Apt, err = ParseAptTxt(apt); err != nil {
		return err
	}
	if p.Requirements != nil {
		if err := CheckRequirements(p.Requirements); err != nil {
			return err
		}
	}
	if p.RPackages, err = ParseDescription(desc); err != nil {
		return err
	}
	if len(p.Apt) == 0 && p.Requirements == nil && p.InstallR == nil && len(p.RPackages) == 0 {
		return fmt.Errorf("%s: no apt.txt, requirements.txt, install.R or DESCRIPTION: %w (write one, or a Containerfile)", dir, ErrRefused)
	}
	return nil
}

// readBounded reads the regular file sub/name of root (no symbolic link
// followed) of at most MaxPackageFileBytes; a missing file is nil, no
// error. Errors name the file under shown (the directory as the user gave it).
func readBounded(root *os.Root, sub, name, shown string) ([]byte, error) {
	data, err := safefs.ReadNoFollow(root, path.Join(sub, name), MaxPackageFileBytes)
	var rp *safefs.ReadProblem
	switch {
	case errors.As(err, &rp) && rp.Phrase == "does not exist":
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %v: %w", filepath.Join(shown, name), err, ErrRefused)
	}
	return data, nil
}

// debName is a Debian package name (Debian Policy §5.6.1: lower-case
// letters, digits, '+', '-', '.'; at least two characters, starting
// alphanumeric) with an optional =VERSION (§5.6.12: [epoch:]upstream[-revision]
// of letters, digits, '.', '+', '~', '-').
var debName = lazyre.New(`^[a-z0-9][a-z0-9+.-]+(=([0-9]+:)?[0-9][A-Za-z0-9.+~-]*)?$`)

// ParseAptTxt reads apt.txt: one Debian package a line (NAME or
// NAME=VERSION; comments after #), returned sorted and without repeats.
// A word that is not a package name is refused naming the line, and so is
// one ending in '-' or '+' after a version or in '-' (apt-get reads a
// trailing '-' as "remove", a trailing '+' as "install"). The build passes
// the names so that apt-get reads them as exact names (Plan.aptStep).
func ParseAptTxt(data []byte) ([]string, error) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		for _, w := range strings.Fields(line) {
			if !debName().MatchString(w) {
				return nil, fmt.Errorf("apt.txt line %d: %q is not a Debian package name (NAME or NAME=VERSION): %w", n, w, ErrRefused)
			}
			if strings.HasSuffix(w, "-") || (strings.Contains(w, "=") && strings.HasSuffix(w, "+")) {
				return nil, fmt.Errorf("apt.txt line %d: %q: a trailing - or + is an apt-get action (remove, install), not part of a package: %w", n, w, ErrRefused)
			}
			seen[w] = true
		}
	}
	if len(seen) > MaxPackages {
		return nil, fmt.Errorf("apt.txt: more than %d packages: %w", MaxPackages, ErrRefused)
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out, nil
}

var (
	reqPin  = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*===?\s*[A-Za-z0-9.+!_-]+\s*(;.*)?$`)
	reqHash = lazyre.New(`^--hash[= ]sha256:[0-9a-f]{64}$`)
)

// CheckRequirements checks requirements.txt for `pip install
// --require-hashes`: every requirement is NAME==VERSION (or ===, an
// environment marker allowed) with at least one --hash=sha256:<64 hex>;
// options that change where pip looks (-r, -c, -e, -i, --index-url,
// --extra-index-url, -f, a URL or a path) are refused: the index is the
// build's (--pip-index). Every refusal names the line.
func CheckRequirements(data []byte) error {
	for _, r := range joinContinuations(data) {
		words := strings.Fields(r.text)
		var spec []string
		hashes := 0
		for _, w := range words {
			switch {
			case strings.HasPrefix(w, "--hash"):
				if !reqHash().MatchString(w) {
					return fmt.Errorf("requirements.txt line %d: %s: write --hash=sha256:<64 hex>: %w", r.line, w, ErrRefused)
				}
				hashes++
			case strings.HasPrefix(w, "-"):
				return fmt.Errorf("requirements.txt line %d: option %s is not accepted: the index is the build's (--pip-index) and every requirement is listed here: %w", r.line, w, ErrRefused)
			default:
				spec = append(spec, w)
			}
		}
		s := strings.Join(spec, " ")
		if strings.Contains(s, "://") || strings.Contains(s, "/") || !reqPin().MatchString(s) {
			return fmt.Errorf("requirements.txt line %d: %q is not pinned: write NAME==VERSION --hash=sha256:<64 hex> (`pip hash FILE` or `pip-compile --generate-hashes`): %w", r.line, s, ErrRefused)
		}
		if hashes == 0 {
			return fmt.Errorf("requirements.txt line %d: %s has no --hash: every requirement needs --hash=sha256:<64 hex>, as `pip install --require-hashes` checks (`pip-compile --generate-hashes` writes them): %w", r.line, s, ErrRefused)
		}
	}
	return nil
}

type logicalLine struct {
	line int
	text string
}

// joinContinuations splits requirements.txt into logical lines (a trailing
// backslash continues; comments start at " #" or a leading #).
func joinContinuations(data []byte) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			line = ""
		}
		if cur.Len() == 0 {
			start = n
		}
		if t := strings.TrimRight(line, " \t"); strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, logicalLine{start, s})
		}
		cur.Reset()
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, logicalLine{start, s})
	}
	return out
}

var rName = lazyre.New(`^[A-Za-z][A-Za-z0-9.]*$`)

// rBase are the packages that come with R itself (never installed from a repository).
var rBase = map[string]bool{"R": true, "base": true, "compiler": true, "datasets": true, "graphics": true,
	"grDevices": true, "grid": true, "methods": true, "parallel": true, "splines": true, "stats": true,
	"stats4": true, "tcltk": true, "tools": true, "utils": true}

// ParseDescription reads an R DESCRIPTION file (Debian control format) and
// returns the packages its Depends and Imports name, without version
// constraints and without R's own packages, sorted.
func ParseDescription(data []byte) ([]string, error) {
	fields := map[string]string{}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && last != "" {
			fields[last] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = strings.TrimSpace(k)
		fields[last] = strings.TrimSpace(v)
	}
	seen := map[string]bool{}
	for _, f := range []string{"Depends", "Imports"} {
		for _, item := range strings.Split(fields[f], ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(item), "(")
			name = strings.TrimSpace(name)
			if name == "" || rBase[name] {
				continue
			}
			if !rName().MatchString(name) {
				return nil, fmt.Errorf("DESCRIPTION %s: %q is not an R package name: %w", f, name, ErrRefused)
			}
			seen[name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// Repositories are where a repo2docker build installs from.
type Repositories struct {
	// AptSources, when set, replace the base image's apt sources for the
	// build ("deb [trusted=yes] http://… ./" lines); the image keeps its own.
	AptSources []string
	// DebianMirror is the mirror the base's own sources name (admitted
	// through the egress proxy when AptSources is empty).
	DebianMirror string
	PipIndex     string
	CRAN         string
}

func (r Repositories) withDefaults() Repositories {
	if r.DebianMirror == "" {
		r.DebianMirror = DefaultDebianMirror
	}
	if r.PipIndex == "" {
		r.PipIndex = DefaultPipIndex
	}
	if r.CRAN == "" {
		r.CRAN = DefaultCRAN
	}
	return r
}

// Plan is a generated build: the Containerfile, the files of its context
// (name → content) and the hosts its steps reach.
type Plan struct {
	Containerfile []byte
	Files         map[string][]byte
	Egress        []string
}

// Plan writes the Containerfile that installs p over base: one RUN per
// kind (apt, then pip into VenvDir, then R), each reaching only its
// repository through the egress proxy.
func (p *PackageFiles) Plan(base string, repos Repositories) (*Plan, error) {
	repos = repos.withDefaults()
	pl := &Plan{Files: map[string][]byte{}}
	var b strings.Builder
	b.WriteString("FROM " + base + "\nCOPY dotlab /tmp/dotlab\n")
	apt := p.Apt
	if p.Requirements != nil {
		apt = append(append([]string(nil), apt...), "python3-venv")
	}
	if len(apt) > 0 {
		if err := pl.aptStep(&b, apt, repos); err != nil {
			return nil, err
		}
	}
	if p.Requirements != nil {
		if err := pl.admit(repos.PipIndex); err != nil {
			return nil, err
		}
		pl.Files["requirements.txt"] = p.Requirements
		fmt.Fprintf(&b, "RUN python3 -m venv --system-site-packages %s && %s/bin/python -m pip install --no-cache-dir --no-input --disable-pip-version-check --require-hashes --only-binary=:all: --index-url %s -r /tmp/dotlab/requirements.txt\n", VenvDir, VenvDir, shellQuote(repos.PipIndex))
		fmt.Fprintf(&b, "ENV VIRTUAL_ENV=%s PATH=%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n", VenvDir, VenvDir)
	}
	if p.InstallR != nil || len(p.RPackages) > 0 {
		if err := pl.admit(repos.CRAN); err != nil {
			return nil, err
		}
		pl.rStep(&b, p, repos.CRAN)
	}
	b.WriteString("RUN rm -rf /tmp/dotlab\n")
	pl.Containerfile = []byte(b.String())
	return pl, nil
}

// admit adds the host of repository URL u to the egress list.
func (pl *Plan) admit(u string) error {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return fmt.Errorf("repository %q: give an http(s) URL", u)
	}
	pl.Egress = append(pl.Egress, pu.Scheme+"://"+pu.Host)
	return nil
}

// aptStep installs packages with apt-get (no recommends, services kept
// from starting), from AptSources when set.
func (pl *Plan) aptStep(b *strings.Builder, pkgs []string, repos Repositories) error {
	opts := "-o Dpkg::Use-Pty=0 -o APT::Install-Recommends=false -o APT::Install-Suggests=false"
	if len(repos.AptSources) > 0 {
		for _, s := range repos.AptSources {
			f := strings.Fields(s)
			for _, w := range f {
				if strings.Contains(w, "://") {
					if err := pl.admit(w); err != nil {
						return err
					}
				}
			}
		}
		pl.Files["sources.list"] = []byte(strings.Join(repos.AptSources, "\n") + "\n")
		pl.Files["sources.list.d/.keep"] = nil
		opts += " -o Dir::Etc::SourceList=/tmp/dotlab/sources.list -o Dir::Etc::SourceParts=/tmp/dotlab/sources.list.d"
	} else if err := pl.admit(repos.DebianMirror); err != nil {
		return err
	}
	fmt.Fprintf(b, "RUN set -e; export DEBIAN_FRONTEND=noninteractive; printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; "+
		"apt-get %s update -qq; apt-get %s install -y -qq %s; %s; apt-get clean; rm -f /usr/sbin/policy-rc.d; rm -rf /var/lib/apt/lists/*; "+
		"mkdir -p /usr/share/dotlab; dpkg-query -W -f='${Package}=${Version}\\n' | LC_ALL=C sort > /%s\n",
		opts, opts, strings.Join(aptInstallWords(pkgs), " "), aptInstalledCheck(pkgs), PackagesFile)
	return nil
}

// aptInstallWords are the apt-get install arguments for apt.txt's checked
// words (ParseAptTxt): a NAME as the pattern '?exact-name(NAME)' (apt >=
// 2.0), so it is never read as a regular expression; a NAME=VERSION as is
// (apt-get selects a version only by name; a NAME that is no package is
// caught by aptInstalledCheck). Each word single-quoted.
func aptInstallWords(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		if strings.Contains(p, "=") {
			out[i] = shellQuote(p)
		} else {
			out[i] = shellQuote("?exact-name(" + p + ")")
		}
	}
	return out
}

// aptInstalledCheck is a shell command failing, naming the word, unless
// every apt.txt word is installed as named: dpkg status "ii" for NAME, at
// exactly VERSION when given. apt-get exits 0 when a pattern matches
// nothing, and a NAME=VERSION whose NAME is no package may be read as a
// pattern; this check makes either fail the build.
func aptInstalledCheck(pkgs []string) string {
	words := make([]string, len(pkgs))
	for i, p := range pkgs {
		words[i] = shellQuote(p)
	}
	return "for w in " + strings.Join(words, " ") + `; do n=${w%%=*}; s=$(dpkg-query -W -f='${db:Status-Abbrev}${Package}=${Version}' "$n" 2>/dev/null || true); ` +
		`case "$w" in *=*) ok=0; [ "$s" = "ii $w" ] && ok=1;; *) ok=0; case "$s" in "ii $n="*) ok=1;; esac;; esac; ` +
		`[ "$ok" = 1 ] || { echo "apt.txt: $w is not installed as named (installed: ${s:-nothing})" >&2; exit 1; }; done`
}

// rStep installs DESCRIPTION's packages and runs install.R with the
// CRAN-like repository set, failing when a named package did not install.
func (pl *Plan) rStep(b *strings.Builder, p *PackageFiles, cran string) {
	repo := fmt.Sprintf(`options(repos = c(CRAN = "%s"), Ncpus = 2L)`, cran)
	if len(p.RPackages) > 0 {
		list := `c("` + strings.Join(p.RPackages, `", "`) + `")`
		fmt.Fprintf(b, "RUN Rscript -e %s -e %s -e %s\n", shellQuote(repo),
			shellQuote("install.packages("+list+")"),
			shellQuote("miss <- setdiff("+list+", rownames(installed.packages())); if (length(miss)) { message(\"not installed: \", paste(miss, collapse = \", \")); quit(status = 1) }"))
	}
	if p.InstallR != nil {
		pl.Files["install.R"] = p.InstallR
		fmt.Fprintf(b, "RUN Rscript -e %s -e %s\n", shellQuote(repo), shellQuote(`source("/tmp/dotlab/install.R")`))
	}
}

// shellQuote quotes s for /bin/sh with single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
