package scaffold

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/internal/lazyre"
)

// Bounds of the code init reads: files, bytes per file (a notebook may
// carry its outputs), bytes in all. A file over a bound is not read and a
// note names it; the rest of the package still is.
const (
	MaxCodeFiles     = 2000
	MaxCodeFileBytes = 4 << 20
	MaxNotebookBytes = 32 << 20
	MaxCodeBytes     = 128 << 20
	MaxCodeUnits     = 20000 // scripts, notebook cells and R Markdown chunks
)

// codeUnit is one piece of source text a reader parses: a script, a
// notebook's code cell or an R Markdown chunk.
type codeUnit struct {
	file string   // the package path, slash-separated
	lang Language // LangPython or LangR
	line int      // the file line of the unit's first line (1 for a script)
	cell int      // the notebook cell (1-based), 0 outside notebooks
	src  string
	// fetches are the unit lines of notebook shell escapes that install or
	// download (!pip install, %conda, !wget …), blanked from src.
	fetches []int
}

// at is the place of line n of the unit, as a note names it.
func (u codeUnit) at(n int) string {
	if u.cell > 0 {
		return fmt.Sprintf("%s cell %d line %d", u.file, u.cell, n)
	}
	return fmt.Sprintf("%s:%d", u.file, u.line+n-1)
}

// vendored are directories of installed libraries, not the package's code.
var vendored = map[string]bool{".git": true, "renv": true, "packrat": true, "venv": true, ".venv": true,
	"site-packages": true, "node_modules": true, ".ipynb_checkpoints": true, "__pycache__": true, ".Rproj.user": true}

// codeKind is how a file is read: "py", "r", "ipynb", "rmd", or "" (not code).
func codeKind(name string) string {
	for _, dir := range strings.Split(path.Dir(name), "/") {
		if vendored[dir] {
			return ""
		}
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".py":
		return "py"
	case ".r":
		return "r"
	case ".ipynb":
		return "ipynb"
	case ".rmd", ".qmd":
		return "rmd"
	}
	return ""
}

// codeFiles are the files of files (sorted) that init reads, at most MaxCodeFiles.
func codeFiles(files []string) (read []string, beyond int) {
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	for _, f := range sorted {
		if codeKind(f) == "" {
			continue
		}
		if len(read) == MaxCodeFiles {
			beyond++
			continue
		}
		read = append(read, f)
	}
	return read, beyond
}

// unitsOf splits a code file into the units its readers parse. A script
// is one unit; a notebook gives its code cells, an R Markdown file its r
// and python chunks (not those with eval = FALSE).
func unitsOf(name string, body []byte) ([]codeUnit, error) {
	switch codeKind(name) {
	case "py":
		return []codeUnit{{file: name, lang: LangPython, line: 1, src: string(body)}}, nil
	case "r":
		return []codeUnit{{file: name, lang: LangR, line: 1, src: string(body)}}, nil
	case "ipynb":
		return notebookUnits(name, body)
	case "rmd":
		return chunkUnits(name, string(body)), nil
	}
	return nil, nil
}

// notebook is the part of an nbformat 4 notebook init reads.
type notebook struct {
	Cells []struct {
		CellType string          `json:"cell_type"`
		Source   json.RawMessage `json:"source"` // a string or a list of strings
	} `json:"cells"`
	Metadata struct {
		Kernelspec struct {
			Language string `json:"language"`
		} `json:"kernelspec"`
		LanguageInfo struct {
			Name string `json:"name"`
		} `json:"language_info"`
	} `json:"metadata"`
}

// notebookLanguage is the kernel's language: R for an R kernel, else Python.
func (nb *notebook) language() Language {
	for _, l := range []string{nb.Metadata.Kernelspec.Language, nb.Metadata.LanguageInfo.Name} {
		if strings.EqualFold(l, "r") {
			return LangR
		}
	}
	return LangPython
}

// notebookUnits gives a notebook's code cells. IPython's line magics and
// shell escapes (%…, !…) are blanked (they are not Python); a cell magic
// (%%…) other than %%time, %%timeit and %%capture makes the cell another
// language, and it is skipped.
func notebookUnits(name string, body []byte) ([]codeUnit, error) {
	var nb notebook
	if err := json.Unmarshal(body, &nb); err != nil || nb.Cells == nil {
		return nil, fmt.Errorf("%s: not read: not an nbformat 4 notebook (JSON with cells)", name)
	}
	lang := nb.language()
	var units []codeUnit
	for i, c := range nb.Cells {
		if c.CellType != "code" {
			continue
		}
		src, err := cellSource(c.Source)
		if err != nil {
			return nil, fmt.Errorf("%s: cell %d: %v", name, i+1, err)
		}
		u := codeUnit{file: name, lang: lang, line: 1, cell: i + 1}
		if lang == LangPython {
			for n, l := range strings.Split(src, "\n") {
				if notebookFetch().MatchString(l) {
					u.fetches = append(u.fetches, n+1)
				}
			}
			var ok bool
			if src, ok = blankMagics(src); !ok {
				continue
			}
		}
		u.src = src
		units = append(units, u)
	}
	return units, nil
}

func cellSource(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return "", fmt.Errorf("source is neither a string nor a list of strings")
	}
	return strings.Join(lines, ""), nil
}

var pythonCellMagic = lazyre.New(`^%%(time|timeit|capture)\b`)

// blankMagics blanks IPython magic and shell lines; ok is false for a cell in another language.
func blankMagics(src string) (string, bool) {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		t := strings.TrimLeft(l, " \t")
		switch {
		case i == 0 && strings.HasPrefix(t, "%%") && !pythonCellMagic().MatchString(t):
			return "", false
		case strings.HasPrefix(t, "%") || strings.HasPrefix(t, "!"):
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n"), true
}

// Shell escapes and magics that install or fetch (the sandbox has no network).
var notebookFetch = lazyre.New(`^\s*[!%]\s*(pip3?|conda|mamba|wget|curl|apt(-get)?)\b`)

var (
	chunkStart = lazyre.New("^[\t >]*(`{3,})[ \t]*\\{[ \t]*([A-Za-z0-9_]+)([^}]*)\\}[ \t]*$")
	chunkEnd   = lazyre.New("^[\t >]*(`{3,})[ \t]*$")
	evalFalse  = lazyre.New(`\beval[ \t]*=[ \t]*(FALSE|F)\b`)
)

// chunkUnits gives the r and python chunks of an R Markdown (or Quarto) file.
func chunkUnits(name, body string) []codeUnit {
	var units []codeUnit
	lines := strings.Split(body, "\n")
	for i := 0; i < len(lines); i++ {
		m := chunkStart().FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start, fence := i+1, m[1]
		for i++; i < len(lines); i++ {
			if e := chunkEnd().FindStringSubmatch(lines[i]); e != nil && len(e[1]) >= len(fence) {
				break
			}
		}
		lang := map[string]Language{"r": LangR, "python": LangPython}[strings.ToLower(m[2])]
		if lang == LangOther || evalFalse().MatchString(m[3]) {
			continue
		}
		units = append(units, codeUnit{file: name, lang: lang, line: start + 1, src: strings.Join(lines[start:min(i, len(lines))], "\n")})
	}
	return units
}
