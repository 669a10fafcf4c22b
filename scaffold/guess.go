package scaffold

import (
	"fmt"
	"path"
	"strings"
)

// Language is what a package is written in, as far as its file names tell.
type Language string

// The languages init tells apart.
const (
	LangR      Language = "r"
	LangPython Language = "python"
	LangOther  Language = ""
)

// Recipe is the image recipe (examples/images) for a language and the
// reference its build prints.
func (l Language) Recipe() (script, ref string) {
	switch l {
	case LangR:
		return "examples/images/r/build.sh", "dotlab.example/r@sha256:…"
	case LangPython:
		return "examples/images/python-sci/build.sh", "dotlab.example/python-sci@sha256:…"
	}
	return "examples/images/python/build.sh", "the digest it prints"
}

// detectLanguage counts R files (*.R, *.Rmd, DESCRIPTION, *.Rproj) and
// Python files (*.py, *.ipynb, requirements.txt, pyproject.toml, setup.py)
// among files (slash-separated paths). The larger count wins; a tie of
// nonzero counts is R (R packages often ship Python helpers, rarely the
// other way). why says what was found.
func detectLanguage(files []string) (lang Language, why string) {
	var r, py int
	for _, f := range files {
		base := path.Base(f)
		switch ext := strings.ToLower(path.Ext(base)); {
		case ext == ".r" || ext == ".rmd" || ext == ".rproj" || base == "DESCRIPTION":
			r++
		case ext == ".py" || ext == ".ipynb" || base == "requirements.txt" || base == "pyproject.toml" || base == "setup.py":
			py++
		}
	}
	switch {
	case r == 0 && py == 0:
		return LangOther, "no R or Python files found"
	case r >= py:
		return LangR, fmt.Sprintf("%d R file%s, %d Python file%s", r, plural(r), py, plural(py))
	}
	return LangPython, fmt.Sprintf("%d Python file%s, %d R file%s", py, plural(py), r, plural(r))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// SplitCommand splits a command line into argv as a POSIX shell splits
// words: blanks separate words, 'single quotes' keep everything, "double
// quotes" keep everything but \" \\ \$ \` escapes, and a backslash outside
// quotes escapes the next character. Nothing is expanded and no shell runs:
// unquoted shell syntax (| & ; < > ( ) $ ` * ? [ ~ #) is refused, so that
// `Rscript main.R > out.txt` is not silently passed ">" as an argument;
// write `sh -c '…'` to run a shell.
func SplitCommand(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				args, inWord = append(args, cur.String()), false
				cur.Reset()
			}
			continue
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			n, err := doubleQuoted(s[i+1:], &cur)
			if err != nil {
				return nil, fmt.Errorf("%v in %q", err, s)
			}
			i += n + 1
		case c == '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("trailing \\ in %q", s)
			}
			i++
			cur.WriteByte(s[i])
		case strings.IndexByte("|&;<>()$`*?[~#", c) >= 0 && (c != '~' && c != '#' || !inWord):
			return nil, fmt.Errorf("%q uses shell syntax (%c), but no shell runs: quote it, or write sh -c '…'", s, c)
		default:
			cur.WriteByte(c)
		}
		inWord = true
	}
	if inWord {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	return args, nil
}

// doubleQuoted copies the body of a double-quoted string (s starts after
// the opening quote) into b and returns the index of the closing quote.
func doubleQuoted(s string, b *strings.Builder) (int, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i, nil
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
			i++
			b.WriteByte(s[i])
		case c == '$' || c == '`':
			return 0, fmt.Errorf("%c inside double quotes would be expanded by a shell, but no shell runs: use single quotes", c)
		default:
			b.WriteByte(c)
		}
	}
	return 0, fmt.Errorf("unterminated \"")
}
