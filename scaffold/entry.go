package scaffold

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// mainScripts are the names a package's main script usually has, in order
// of preference (matched case-insensitively at the top level).
var mainScripts = []string{"run.sh", "main.R", "master.R", "run_all.R", "runall.R", "00_master.R", "run.R", "analysis.R",
	"main.py", "master.py", "run_all.py", "run.py", "analysis.py"}

// entryGuess is a guessed entrypoint: its argv, the file it runs, why it
// was chosen, and what it needs from the image besides the code's imports.
type entryGuess struct {
	argv  []string
	file  string
	why   string
	needs []need
}

// scriptArgv runs a script by its language.
func scriptArgv(file string) entryGuess {
	switch strings.ToLower(path.Ext(file)) {
	case ".r":
		return entryGuess{argv: []string{"Rscript", file}, file: file, needs: []need{{NeedCommand, "Rscript"}}}
	case ".py":
		return entryGuess{argv: []string{"python3", file}, file: file, needs: []need{{NeedCommand, "python3"}}}
	}
	return entryGuess{argv: []string{"sh", file}, file: file}
}

// guessEntrypoint picks, in order: a top-level main script (mainScripts);
// the only script (.py or .R); without scripts, the only notebook,
// executed by nbconvert into /work/out; without either, the only R
// Markdown file, rendered into /work/out. The top level is looked at
// first, then the whole package. ok is false when none applies.
func guessEntrypoint(files []string, notebookLang Language) (entryGuess, bool) {
	top := map[string]string{}
	var scripts, notebooks, rmds []string
	for _, f := range files {
		if !strings.Contains(f, "/") {
			top[strings.ToLower(f)] = f
		}
		switch codeKind(f) {
		case "py", "r":
			if base := path.Base(f); base != "setup.py" && base != "conftest.py" && base != "__init__.py" {
				scripts = append(scripts, f)
			}
		case "ipynb":
			notebooks = append(notebooks, f)
		case "rmd":
			if strings.EqualFold(path.Ext(f), ".rmd") {
				rmds = append(rmds, f)
			}
		}
	}
	for _, name := range mainScripts {
		if f, ok := top[strings.ToLower(name)]; ok {
			g := scriptArgv(f)
			g.why = "a main script's name"
			return g, true
		}
	}
	// The top level first: a package's R/ or src/ holds its library code.
	for _, at := range []func([]string) []string{topLevel, func(s []string) []string { return s }} {
		scripts, notebooks, rmds := at(scripts), at(notebooks), at(rmds)
		switch {
		case len(scripts) == 1:
			g := scriptArgv(scripts[0])
			g.why = "the package's only script"
			return g, true
		case len(scripts) == 0 && len(notebooks) == 1:
			return notebookEntry(notebooks[0], notebookLang), true
		case len(scripts) == 0 && len(notebooks) == 0 && len(rmds) == 1:
			return rmdEntry(rmds[0]), true
		case len(scripts)+len(notebooks)+len(rmds) > 0:
			return entryGuess{}, false
		}
	}
	return entryGuess{}, false
}

func topLevel(files []string) []string {
	var out []string
	for _, f := range files {
		if !strings.Contains(f, "/") {
			out = append(out, f)
		}
	}
	return out
}

// notebookEntry executes a notebook with nbconvert, writing the executed
// copy to /work/out (the code directory is read-only); the kernel runs in
// the notebook's directory.
func notebookEntry(file string, lang Language) entryGuess {
	needs := []need{{NeedCommand, "jupyter"}, {NeedCommand, "jupyter-nbconvert"}}
	if lang == LangR {
		needs = append(needs, need{NeedR, "IRkernel"})
	} else {
		needs = append(needs, need{NeedPython, "ipykernel"})
	}
	return entryGuess{argv: []string{"jupyter", "nbconvert", "--to", "notebook", "--execute", "--output-dir", "/work/out", file},
		file: file, why: "the package's only notebook, executed with nbconvert", needs: needs}
}

// rmdEntry renders an R Markdown file with rmarkdown into /work/out, its
// intermediate files in a temporary directory.
func rmdEntry(file string) entryGuess {
	expr := fmt.Sprintf("rmarkdown::render(%s, output_dir = '/work/out', intermediates_dir = tempdir())", rString(file))
	return entryGuess{argv: []string{"Rscript", "-e", expr}, file: file, why: "the package's only R Markdown file, rendered with rmarkdown",
		needs: []need{{NeedCommand, "Rscript"}, {NeedR, "rmarkdown"}, {NeedCommand, "pandoc"}}}
}

// rString is s as a single-quoted R string literal.
func rString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// entrypoint splits --entrypoint, or guesses it from the files.
func (b *builder) entrypoint(files []string) error {
	if b.opts.Entrypoint != "" {
		argv, err := SplitCommand(b.opts.Entrypoint)
		if err != nil {
			return fmt.Errorf("--entrypoint: %w", err)
		}
		b.m.Entrypoint = argv
		return nil
	}
	if g, ok := guessEntrypoint(files, b.notebookLanguage()); ok {
		b.m.Entrypoint, b.entryNeeds = g.argv, g.needs
		b.check("$.entrypoint", "a guess from %s (%s): check that it runs the whole analysis (or pass --entrypoint)", g.file, g.why)
		return nil
	}
	b.m.Entrypoint = []string{"REPLACE-with-the-command"}
	b.placeholder("$.entrypoint", nil, "no main script found (run.sh, main.R, master.R, main.py, …, a single script, notebook or R Markdown file): give the command that runs the analysis, e.g. --entrypoint \"Rscript main.R\"")
	return nil
}

// notebookLanguage is the language of the notebooks read (Python unless an R kernel's).
func (b *builder) notebookLanguage() Language {
	if b.scan != nil {
		for _, u := range b.scan.units {
			if u.cell > 0 {
				return u.lang
			}
		}
	}
	return LangPython
}

// noteFindings notes each finding, and turns scratch on when the code writes next to itself.
func (b *builder) noteFindings() {
	if b.scan == nil {
		return
	}
	var writes []string
	for _, f := range b.scan.findings {
		if f.Kind == FindWrites {
			writes = append(writes, f.Where+": "+f.What)
			continue
		}
		if i := slices.Index(b.opts.Downloads, f.URL); f.Kind == FindNetwork && f.URL != "" && i >= 0 {
			b.check("$.code", "%s: %s fetches a URL pinned in downloads[%d] (--download): the sandbox's responder answers it with the pinned bytes", f.Where, f.What, i)
			continue
		}
		b.warn("$.code", "%s", f)
	}
	if len(writes) == 0 {
		return
	}
	shown := writes[:min(len(writes), 10)]
	more := ""
	if len(writes) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(writes)-len(shown))
	}
	b.m.Scratch = true
	b.check("$.scratch", "true: the code writes next to itself (%s%s; a path computed at run time may be elsewhere: check it), and /work/code is read-only; targets may read those files under /work/scratch/; see %s#%s",
		strings.Join(shown, "; "), more, HowTo, findingSection[FindWrites])
}
