package scaffold

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// codeReader reads one file of the code as pinned, refusing more than limit bytes.
type codeReader func(name string, limit int64) ([]byte, error)

// dirReader reads the files of a directory through an os.Root.
func dirReader(dir string) codeReader {
	return func(name string, limit int64) ([]byte, error) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		f, err := root.Open(filepath.FromSlash(name))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("not a regular file")
		}
		return readBounded(f, limit)
	}
}

func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d MiB", limit>>20)
	}
	return b, nil
}

// needSite is a need and the first place the code names it.
type needSite struct {
	need
	where string
}

// codeScan is what init read in the code.
type codeScan struct {
	needs     []needSite
	findings  []Finding
	units     []codeUnit
	aptTxt    []string        // the package's own apt.txt, when it has one
	hasAptTxt bool            // the code as pinned holds an apt.txt
	local     map[string]bool // Python modules and R packages of the package itself
}

// readCode reads the package's code files (bounded by MaxCodeFiles,
// MaxCodeFileBytes, MaxNotebookBytes, MaxCodeBytes and ParseTimeout) with
// each language's reader and records what it needs and what fails in the
// sandbox. A file that cannot be read or parsed is named in a note.
func (b *builder) readCode(ctx context.Context, files []string, read codeReader) error {
	sc := &codeScan{local: localModules(files)}
	b.scan = sc
	list, beyond := codeFiles(files)
	if beyond > 0 {
		b.warn("$.code", "%d code files beyond the first %d were not read", beyond, MaxCodeFiles)
	}
	var total int64
	for _, f := range list {
		limit := int64(MaxCodeFileBytes)
		if codeKind(f) == "ipynb" {
			limit = MaxNotebookBytes
		}
		body, err := read(f, min(limit, MaxCodeBytes-total))
		if err != nil {
			b.warn("$.code", "%s: not read: %v", f, err)
			continue
		}
		total += int64(len(body))
		units, err := unitsOf(f, body)
		if err != nil {
			b.warn("$.code", "%v", err)
			continue
		}
		if len(sc.units)+len(units) > MaxCodeUnits {
			b.warn("$.code", "%s and the files after it were not read: more than %d scripts, cells and chunks", f, MaxCodeUnits)
			break
		}
		sc.units = append(sc.units, units...)
	}
	b.readSpecial(files, read)
	for _, lang := range []Language{LangPython, LangR} {
		if err := b.parseUnits(ctx, lang); err != nil {
			return err
		}
	}
	return nil
}

// readSpecial reads the package's apt.txt and its DESCRIPTION's package name.
func (b *builder) readSpecial(files []string, read codeReader) {
	for _, f := range files {
		switch f {
		case "apt.txt":
			if body, err := read(f, 1<<20); err == nil {
				b.scan.aptTxt, b.scan.hasAptTxt = aptNames(string(body)), true
			}
		case "DESCRIPTION":
			if body, err := read(f, 1<<20); err == nil {
				for _, l := range strings.Split(string(body), "\n") {
					if v, ok := strings.CutPrefix(l, "Package:"); ok {
						b.scan.local[strings.TrimSpace(v)] = true
					}
				}
			}
		}
	}
}

// aptNames are the package names of an apt.txt: one a line, # comments.
func aptNames(text string) []string {
	var names []string
	for _, l := range strings.Split(text, "\n") {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	return names
}

// localModules are the modules a package holds itself: its .py files'
// names and the directories holding them, its .R files' names.
func localModules(files []string) map[string]bool {
	local := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, ".py") {
			local[strings.TrimSuffix(path.Base(f), ".py")] = true
			for d := path.Dir(f); d != "."; d = path.Dir(d) {
				local[path.Base(d)] = true
			}
		}
	}
	return local
}

// reader is the command that parses lang, or "" with the reason when none is on PATH.
func (b *builder) reader(lang Language) (string, string) {
	cmd, pkg := b.opts.Python, "python3"
	if lang == LangR {
		cmd, pkg = b.opts.Rscript, "r-base-core"
	}
	if cmd == "" {
		cmd = map[Language]string{LangPython: "python3", LangR: "Rscript"}[lang]
	}
	if _, err := exec.LookPath(cmd); err != nil {
		return "", fmt.Sprintf("%s is not on PATH (Debian package %s)", cmd, pkg)
	}
	return cmd, ""
}

// parseUnits runs lang's reader over the units in lang and records its findings.
func (b *builder) parseUnits(ctx context.Context, lang Language) error {
	var units []codeUnit
	var srcs []string
	for _, u := range b.scan.units {
		if u.lang == lang {
			units, srcs = append(units, u), append(srcs, u.src)
		}
	}
	if len(units) == 0 {
		return nil
	}
	cmd, why := b.reader(lang)
	if cmd == "" {
		b.warn("$.code", "%d %s unit%s not read: %s", len(units), lang, plural(len(units)), why)
		return nil
	}
	run, err := map[Language]func(context.Context, string, []string) (*readerRun, error){LangPython: readPython, LangR: readR}[lang](ctx, cmd, srcs)
	if err != nil {
		b.warn("$.code", "the %s code was not read: %v", lang, err)
		return nil
	}
	seen := map[need]bool{}
	for i, u := range units {
		r := run.results[i]
		if r.Error != "" {
			b.warn("$.code", "%s: not parsed by %s (%s): what it imports and calls is not known", u.at(max(r.ErrLine, 1)), cmd, r.Error)
			continue
		}
		b.scan.findings = append(b.scan.findings, classify(u, r)...)
		for _, n := range importsOf(lang, r) {
			top := need{kind: NeedPython, name: strings.Split(n.Name, ".")[0]}
			if lang == LangR {
				top = need{kind: NeedR, name: n.Name}
			}
			if top.name == "" || run.builtin[top.name] || b.scan.local[top.name] || seen[top] {
				continue
			}
			seen[top] = true
			b.scan.needs = append(b.scan.needs, needSite{need: top, where: u.at(n.Line)})
		}
	}
	return nil
}

// importsOf lists what a unit imports: Python's import statements, R's
// pkg:: and library(), require(), requireNamespace(), loadNamespace(),
// pacman::p_load() (a name, or a string; not with character.only = TRUE).
func importsOf(lang Language, r unitResult) []named {
	if lang == LangPython {
		return r.Imports
	}
	out := append([]named(nil), r.Imports...)
	for _, c := range r.Calls {
		fn := c.Func[strings.LastIndex(c.Func, ":")+1:]
		switch fn {
		case "library", "require", "requireNamespace", "loadNamespace", "p_load":
		default:
			continue
		}
		var names []named
		charOnly := false
		for i, a := range c.Args {
			switch {
			case a.Name == "character.only":
				charOnly = a.Value == "TRUE" || a.Value == "T"
			case (a.Name == "" || a.Name == "package") && (a.Kind == "str" || a.Kind == "sym") && (i == 0 || fn == "p_load"):
				names = append(names, named{Name: a.Value, Line: c.Line})
			}
		}
		for _, n := range names {
			if !charOnly || n.Name != "" && isStr(c, n.Name) {
				out = append(out, n)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

// isStr: the call passes name as a string literal (with character.only a symbol is a variable).
func isStr(c callSite, name string) bool {
	for _, a := range c.Args {
		if a.Value == name && a.Kind == "str" {
			return true
		}
	}
	return false
}
