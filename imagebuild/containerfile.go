// Package imagebuild builds the environment a replication package declares
// (a Containerfile, or the repo2docker files apt.txt, requirements.txt,
// install.R and DESCRIPTION) into an image of the local store, with buildah
// for every step that runs code and under the build isolation of
// docs/sandbox.md "Building an environment": a network namespace whose only
// exit is an egress proxy admitting the configured mirrors and indexes,
// bounded time, disk and memory, no host mounts.
//
// The result is reproducible: the same inputs give the same image digest
// (fixed timestamps, history omitted, metadata sorted and stripped, the
// trims of examples/images/lib.sh), and the layers of the base image are
// reused as they are (never repacked or recompressed).
package imagebuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/lazyre"
)

// ErrRefused marks a Containerfile, a repo2docker file or a build step that
// the build rules (docs/sandbox.md "Building an environment") refuse. Every
// refusal wraps it and names the rule and the fix.
var ErrRefused = errors.New("refused by the build rules")

// Bounds of a Containerfile: larger ones are refused, not truncated.
const (
	MaxContainerfileBytes = 1 << 20
	MaxInstructions       = 2000
	MaxStages             = 32
)

// Instruction is one Containerfile instruction after line continuations are
// joined: its keyword in upper case, its flags (--name=value, in order) and
// the rest of the line, as buildah reads them. Line is the 1-based line
// where it starts.
type Instruction struct {
	Line    int
	Keyword string
	Flags   []string
	Args    string
}

// Stage is one FROM and what follows it.
type Stage struct {
	// Base is what FROM names: "scratch", an earlier stage (by name or
	// index) or an external image pinned by digest (NAME@sha256:<64 hex>).
	Base string
	// External is true when Base is an image (not scratch, not a stage).
	External bool
	// BaseStage is the index of the earlier stage Base names, or -1.
	BaseStage int
	Name      string
	Body      []Instruction
}

// Containerfile is a parsed, checked Containerfile: its global ARGs
// (instructions before the first FROM) and its stages.
type Containerfile struct {
	Args   []Instruction
	Stages []Stage
}

// knownKeywords are the instructions buildah reads. ONBUILD is refused
// (it plants steps into other builds), as are unknown keywords.
var knownKeywords = map[string]bool{
	"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "MAINTAINER": true,
	"EXPOSE": true, "ENV": true, "ADD": true, "COPY": true, "ENTRYPOINT": true,
	"VOLUME": true, "USER": true, "WORKDIR": true, "ARG": true, "STOPSIGNAL": true,
	"HEALTHCHECK": true, "SHELL": true,
}

func refusedf(line int, rule, format string, args ...any) error {
	return fmt.Errorf("Containerfile line %d: %s: %w (%s)", line, fmt.Sprintf(format, args...), ErrRefused, rule)
}

// ParseContainerfile reads and checks a Containerfile (docs/sandbox.md
// "Building an environment", the Containerfile rules):
//
//   - FROM names scratch, an earlier stage, or an image by digest
//     (NAME@sha256:<64 hex>); a tag, a variable and --platform are refused
//     (rule "FROM by digest only");
//   - ADD of a remote source (any source with a ':' or '@', or starting
//     github.com/) or of a source holding a variable is refused (rule "no
//     ADD <url>"); ADD --checksum and --keep-git-dir are refused with it;
//   - a backslash or a quote in ADD or COPY is refused (buildah unescapes
//     them before reading the word; rule "instructions buildah and this
//     parser read alike");
//   - COPY --from names an earlier stage only, by name or index (not the
//     stage it is in): an image tag, a digest or a variable is refused
//     (rule "COPY --from a stage only");
//   - RUN --mount, --network and --security are refused (rule "RUN without
//     host mounts or network options");
//   - ONBUILD, unknown instructions and the escape parser directive are
//     refused (rule "instructions buildah and this parser read alike");
//   - more than MaxContainerfileBytes, MaxInstructions or MaxStages is refused.
//
// Every error wraps ErrRefused and names the line, the rule and the fix.
func ParseContainerfile(data []byte) (*Containerfile, error) {
	if len(data) > MaxContainerfileBytes {
		return nil, fmt.Errorf("Containerfile: %d bytes is over the %d-byte limit: %w", len(data), MaxContainerfileBytes, ErrRefused)
	}
	ins, err := splitInstructions(data)
	if err != nil {
		return nil, err
	}
	cf := &Containerfile{}
	for _, in := range ins {
		if err := cf.add(in); err != nil {
			return nil, err
		}
	}
	if len(cf.Stages) == 0 {
		return nil, fmt.Errorf("Containerfile: no FROM instruction: %w (start with FROM NAME@sha256:<64 hex>)", ErrRefused)
	}
	return cf, nil
}

// add appends one instruction to the stage it belongs to, checking it.
func (cf *Containerfile) add(in Instruction) error {
	if !knownKeywords[in.Keyword] {
		return refusedf(in.Line, "instructions buildah and this parser read alike", "instruction %s is not accepted: use the instructions of a plain Containerfile (ONBUILD is refused: it plants steps into other builds)", in.Keyword)
	}
	if in.Keyword == "FROM" {
		return cf.from(in)
	}
	if len(cf.Stages) == 0 {
		if in.Keyword != "ARG" {
			return refusedf(in.Line, "FROM first", "%s before the first FROM: only ARG may come before FROM", in.Keyword)
		}
		cf.Args = append(cf.Args, in)
		return nil
	}
	st := &cf.Stages[len(cf.Stages)-1]
	var err error
	switch in.Keyword {
	case "ADD":
		err = checkAdd(in)
	case "COPY":
		err = cf.checkCopy(in)
	case "RUN":
		err = checkRun(in)
	}
	if err != nil {
		return err
	}
	st.Body = append(st.Body, in)
	return nil
}

// stageName is the form of a stage name (FROM … AS name): a word buildah
// reads unchanged (no escape, quote or variable) and that cannot be taken
// for an image reference.
var stageName = lazyre.New(`^[a-z0-9][a-z0-9._-]*$`)

// from starts a stage, checking what its FROM names.
func (cf *Containerfile) from(in Instruction) error {
	if len(cf.Stages) >= MaxStages {
		return refusedf(in.Line, "bounded build", "more than %d stages", MaxStages)
	}
	if len(in.Flags) > 0 {
		return refusedf(in.Line, "FROM by digest only", "FROM %s is not accepted: the platform is this machine's; write FROM NAME@sha256:<64 hex>", in.Flags[0])
	}
	f := strings.Fields(in.Args)
	st := Stage{BaseStage: -1}
	switch {
	case len(f) == 1:
	case len(f) == 3 && strings.EqualFold(f[1], "AS"):
		st.Name = strings.ToLower(f[2])
		if !stageName().MatchString(st.Name) {
			return refusedf(in.Line, "FROM by digest only", "stage name %q: use letters, digits, '-', '_' and '.'", f[2])
		}
	default:
		return refusedf(in.Line, "FROM by digest only", "FROM takes NAME@sha256:<64 hex> [AS stage]")
	}
	st.Base = f[0]
	if strings.Contains(st.Base, "$") {
		return refusedf(in.Line, "FROM by digest only", "FROM %s holds a variable: write the image NAME@sha256:<64 hex> literally", st.Base)
	}
	if i := cf.stageIndex(st.Base); i >= 0 {
		st.BaseStage = i
	} else if st.Base != "scratch" {
		if _, err := imagestore.ParseRef(st.Base); err != nil {
			return refusedf(in.Line, "FROM by digest only", "FROM %s is not pinned by digest: a tag can change under the build; write FROM NAME@sha256:<64 hex> (`dotlab image list` shows the digests in the store)", st.Base)
		}
		st.External = true
	}
	st.Body = nil
	cf.Stages = append(cf.Stages, st)
	return nil
}

// stageIndex is the index of the earlier stage named (or numbered) s, or -1.
func (cf *Containerfile) stageIndex(s string) int {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(cf.Stages) && strconv.Itoa(n) == s {
		return n
	}
	for i, st := range cf.Stages {
		if st.Name != "" && st.Name == strings.ToLower(s) {
			return i
		}
	}
	return -1
}

// checkAdd refuses ADD of a URL, a git source or a variable, and the flags
// that fetch. The sources were checked by sources: no backslash or quote,
// so what is tested here is the word buildah reads.
func checkAdd(in Instruction) error {
	for _, fl := range in.Flags {
		name, _, _ := strings.Cut(fl, "=")
		if name != "--chown" && name != "--chmod" {
			return refusedf(in.Line, "no ADD <url>", "ADD %s is not accepted: only --chown and --chmod", name)
		}
	}
	srcs, err := sources(in)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		if remoteSource(s) {
			return refusedf(in.Line, "no ADD <url>", "ADD %s fetches from the network at build time, unpinned: download the file into the package (or declare it in the manifest's datasets) and COPY it", s)
		}
		if strings.Contains(s, "$") {
			return refusedf(in.Line, "no ADD <url>", "ADD source %s holds a variable, which could name a URL: write the path literally", s)
		}
	}
	return nil
}

// remoteSource reports whether an ADD source could name something remote:
// any scheme ("http:", "git:", …), an scp-like git source ("user@host:repo")
// or a bare "github.com/…". A local path with a colon is refused with them.
func remoteSource(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, ":") || strings.Contains(l, "@") || strings.HasPrefix(l, "github.com/")
}

// checkCopy admits COPY --from only for an earlier stage (not the stage the
// COPY is in), by name or index.
func (cf *Containerfile) checkCopy(in Instruction) error {
	for _, fl := range in.Flags {
		name, val, _ := strings.Cut(fl, "=")
		switch name {
		case "--chown", "--chmod":
		case "--from":
			if i := cf.stageIndex(val); i < 0 || i >= len(cf.Stages)-1 || strings.Contains(val, "$") {
				return refusedf(in.Line, "COPY --from a stage only", "COPY --from=%s names no earlier stage: an image there is unpinned; add a stage FROM NAME@sha256:<64 hex> AS name before this one and COPY --from=name", val)
			}
		default:
			return refusedf(in.Line, "COPY --from a stage only", "COPY %s is not accepted: only --from (a stage), --chown and --chmod", name)
		}
	}
	_, err := sources(in)
	return err
}

// checkRun refuses RUN's flags (mounts, network, security).
func checkRun(in Instruction) error {
	if len(in.Flags) > 0 {
		name, _, _ := strings.Cut(in.Flags[0], "=")
		return refusedf(in.Line, "RUN without host mounts or network options", "RUN %s is not accepted: a build step gets no mounts, no network but the egress proxy and no extra privileges", name)
	}
	return nil
}

// sources are the source arguments of ADD or COPY (all but the last word);
// the JSON form is refused for simplicity of checking ("[" first), and so is
// a backslash or a quote anywhere in the flags or arguments: buildah's word
// processing removes escapes and quotes (`http:\/\/h/x` is http://h/x to
// it), so only words it reads unchanged are checked and written back.
func sources(in Instruction) ([]string, error) {
	if strings.HasPrefix(strings.TrimSpace(in.Args), "[") {
		return nil, refusedf(in.Line, "instructions buildah and this parser read alike", "%s in JSON form is not accepted: write %s SRC... DEST", in.Keyword, in.Keyword)
	}
	if strings.Contains(in.Args, "<<") {
		return nil, refusedf(in.Line, "instructions buildah and this parser read alike", "%s with a here-document is not accepted: put the file in the package and COPY it", in.Keyword)
	}
	for _, w := range append(append([]string(nil), in.Flags...), in.Args) {
		if strings.ContainsAny(w, "\\'\"") {
			return nil, refusedf(in.Line, "instructions buildah and this parser read alike", "%s %s holds a backslash or a quote, which buildah unescapes before reading the word: write the path plainly", in.Keyword, w)
		}
	}
	f := strings.Fields(in.Args)
	if len(f) < 2 {
		return nil, refusedf(in.Line, "instructions buildah and this parser read alike", "%s needs SRC... DEST", in.Keyword)
	}
	return f[:len(f)-1], nil
}

// splitInstructions joins continuation lines (a line ending in a backslash
// continues on the next; comment and blank lines inside are dropped, as
// buildah's parser does) and splits each instruction into keyword, flags
// and arguments.
func splitInstructions(data []byte) ([]Instruction, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxContainerfileBytes)
	var out []Instruction
	var cur strings.Builder
	start, lineNo, directives := 0, 0, true
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimLeft(line, " \t")
		if directives && strings.HasPrefix(trimmed, "#") {
			if err := checkDirective(lineNo, trimmed); err != nil {
				return nil, err
			}
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue // a blank or comment line, also inside a continuation
		}
		directives = false
		part := line // a continuation keeps its leading blanks, as buildah's parser does
		if cur.Len() == 0 {
			start, part = lineNo, trimmed
		}
		if strings.HasSuffix(part, "\\") {
			cur.WriteString(strings.TrimSuffix(part, "\\"))
			continue
		}
		cur.WriteString(part)
		in := splitInstruction(start, cur.String())
		if out = append(out, in); len(out) > MaxInstructions {
			return nil, refusedf(lineNo, "bounded build", "more than %d instructions", MaxInstructions)
		}
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("Containerfile: %v: %w", err, ErrRefused)
	}
	if cur.Len() > 0 {
		return nil, refusedf(start, "instructions buildah and this parser read alike", "the last instruction ends in a line continuation")
	}
	return out, nil
}

// checkDirective refuses the escape parser directive (it changes what a
// line continuation is); other comments at the top are comments.
func checkDirective(line int, text string) error {
	body := strings.TrimSpace(strings.TrimPrefix(text, "#"))
	key, _, ok := strings.Cut(body, "=")
	if ok && strings.EqualFold(strings.TrimSpace(key), "escape") {
		return refusedf(line, "instructions buildah and this parser read alike", "the escape directive is not accepted: use the default backslash")
	}
	return nil
}

// splitInstruction splits "KEYWORD --flag=v ... args" (flags only where
// buildah reads them: FROM, RUN, ADD, COPY).
func splitInstruction(line int, text string) Instruction {
	kw, rest := text, ""
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		kw, rest = text[:i], text[i+1:]
	}
	in := Instruction{Line: line, Keyword: strings.ToUpper(kw)}
	rest = strings.TrimLeft(rest, " \t")
	switch in.Keyword {
	case "FROM", "RUN", "ADD", "COPY":
		for strings.HasPrefix(rest, "--") {
			fl, tail := rest, ""
			if i := strings.IndexAny(rest, " \t"); i >= 0 {
				fl, tail = rest[:i], rest[i+1:]
			}
			in.Flags = append(in.Flags, fl)
			rest = strings.TrimLeft(tail, " \t")
		}
	}
	in.Args = rest
	return in
}

// Text writes the checked Containerfile back, one instruction a line, with
// the external FROM images replaced by base(stage index): what buildah then
// builds is exactly what was checked (no continuation or comment left for
// the two parsers to read differently).
//
// afterFrom, when not empty, is written on the line after every FROM (the
// build's ARG SOURCE_DATE_EPOCH, so that tools in RUN steps see the fixed
// time).
func (cf *Containerfile) Text(base func(i int) string, afterFrom string) string {
	var b strings.Builder
	write := func(in Instruction) {
		b.WriteString(in.Keyword)
		for _, f := range in.Flags {
			b.WriteString(" " + f)
		}
		if in.Args != "" {
			b.WriteString(" " + in.Args)
		}
		b.WriteString("\n")
	}
	for _, in := range cf.Args {
		write(in)
	}
	for i, st := range cf.Stages {
		from := st.Base
		if st.External {
			from = base(i)
		}
		if st.Name != "" {
			from += " AS " + st.Name
		}
		b.WriteString("FROM " + from + "\n")
		if afterFrom != "" {
			b.WriteString(afterFrom + "\n")
		}
		for _, in := range st.Body {
			write(in)
		}
	}
	return b.String()
}
