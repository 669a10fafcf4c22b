package scaffold

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The readers: each language's own parser, run on the package's source text
// and never on anything that executes it (read_python.py: ast.parse;
// read_r.R: parse() and getParseData()).
var (
	//go:embed read_python.py
	pythonReader string
	//go:embed read_r.R
	rReader string
)

// Bounds of a reader run: its time, and what it may print.
const (
	ParseTimeout   = 2 * time.Minute
	maxReaderOut   = 64 << 20
	maxReaderError = 16 << 10
)

// unitResult is what a reader found in one code unit. Lines are the unit's own (1 = its first line).
type unitResult struct {
	Error   string       `json:"error"`
	ErrLine int          `json:"line"`
	Imports []named      `json:"imports"`
	Calls   []callSite   `json:"calls"`
	Strings []stringSite `json:"strings"`
}

type named struct {
	Name string `json:"name"`
	Line int    `json:"line"`
}

// callSite is a call to a watched function: Func is its dotted name with
// import aliases resolved (Python: "requests.get", "df.to_csv") or
// "pkg::fn" / "fn" (R).
type callSite struct {
	Func string    `json:"func"`
	Line int       `json:"line"`
	Args []callArg `json:"args"`
}

// callArg is one argument: Name for a keyword argument, Kind "str" (Value
// the string: a literal, a top-level name bound once to one, os.path.join /
// pathlib.Path / file.path / paste0 of those), "sym" (another name), "num"
// (a number, None, NULL, TRUE…), "std" (R's stdout(), stderr(), stdin())
// or "other" (any other expression).
type callArg struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// stringSite is a path-like string literal (an absolute, home or drive
// path, or a URL) and the call it is an argument of ("" when none).
type stringSite struct {
	Value string `json:"value"`
	Line  int    `json:"line"`
	Func  string `json:"func"`
}

// readerRun is the outcome of one reader over a language's units.
type readerRun struct {
	results []unitResult
	builtin map[string]bool // Python's sys.stdlib_module_names, R's base packages
}

// readerEnv is the environment of a reader: PATH only, a private HOME.
func readerEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}
}

// runReader runs cmd with stdin, bounded by ParseTimeout and maxReaderOut.
func runReader(ctx context.Context, name string, args []string, dir string, stdin []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ParseTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, readerEnv(dir)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut boundedBuffer
	out.max, errOut.max = maxReaderOut, maxReaderError
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: stopped after %s", name, ParseTimeout)
	case out.over:
		return nil, fmt.Errorf("%s: printed more than %d MiB", name, maxReaderOut>>20)
	case err != nil:
		return nil, fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), nil
}

// boundedBuffer keeps at most max bytes and records that more were written.
type boundedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.over = true
		p = p[:max(0, b.max-b.Len())]
	}
	b.Buffer.Write(p)
	return len(p), nil
}

// readPython parses units with python's ast module (python: the command,
// e.g. "python3"), run isolated (-I: no user site, no PYTHON* variables;
// -S: no site module).
func readPython(ctx context.Context, python string, units []string) (*readerRun, error) {
	tmp, err := os.MkdirTemp("", "dotlab-init-py-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	req, err := json.Marshal(map[string][]string{"units": units, "watch": watchedPython, "watch_modules": networkPython})
	if err != nil {
		return nil, err
	}
	out, err := runReader(ctx, python, []string{"-I", "-S", "-c", pythonReader}, tmp, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Stdlib []string     `json:"stdlib"`
		Units  []unitResult `json:"units"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.Units) != len(units) {
		return nil, fmt.Errorf("%s: unreadable answer (%v)", python, err)
	}
	if len(resp.Stdlib) == 0 {
		return nil, fmt.Errorf("%s: no sys.stdlib_module_names (needs Python 3.10 or later)", python)
	}
	return &readerRun{results: resp.Units, builtin: setOf(resp.Stdlib)}, nil
}

// readR parses units with R's parser (rscript: the command, e.g.
// "Rscript"), run with --vanilla (no profile, no environment file, no saved workspace).
func readR(ctx context.Context, rscript string, units []string) (*readerRun, error) {
	tmp, err := os.MkdirTemp("", "dotlab-init-r-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	files := map[string]string{"read.R": rReader, "watch.txt": strings.Join(watchedR, "\n") + "\n", "pkgs.txt": strings.Join(networkR, "\n") + "\n"}
	for i, u := range units {
		// Bytes that are not UTF-8 (a latin1 comment) become U+FFFD, as
		// json.Marshal makes them for the Python reader: lines stay where they were.
		files[fmt.Sprintf("%d.R", i+1)] = strings.ToValidUTF8(u, "\uFFFD")
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o600); err != nil {
			return nil, err
		}
	}
	out, err := runReader(ctx, rscript, []string{"--vanilla", "read.R", tmp, strconv.Itoa(len(units)), "watch.txt", "pkgs.txt"}, tmp, nil)
	if err != nil {
		return nil, err
	}
	run := &readerRun{results: make([]unitResult, len(units)), builtin: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if err := run.rLine(strings.Split(sc.Text(), "\t")); err != nil {
			return nil, fmt.Errorf("%s: unreadable answer: %v", rscript, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", rscript, err)
	}
	return run, nil
}

// rLine reads one line of read_r.R's output into run.
func (run *readerRun) rLine(f []string) error {
	if len(f) == 2 && f[0] == "B" {
		name, err := unhex(f[1])
		run.builtin[name] = true
		return err
	}
	if len(f) < 4 {
		return fmt.Errorf("short line %q", strings.Join(f, "\t"))
	}
	i, err1 := strconv.Atoi(f[1])
	line, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil || i < 1 || i > len(run.results) {
		return fmt.Errorf("bad unit or line in %q", strings.Join(f, "\t"))
	}
	u := &run.results[i-1]
	v, err := unhex(f[3])
	if err != nil {
		return err
	}
	switch {
	case f[0] == "E":
		u.Error, u.ErrLine = v, line
	case f[0] == "P":
		u.Imports = append(u.Imports, named{Name: v, Line: line})
	case f[0] == "S" && len(f) == 5:
		fn, err := unhex(f[4])
		u.Strings = append(u.Strings, stringSite{Value: v, Line: line, Func: fn})
		return err
	case f[0] == "C" && len(f) >= 5:
		return u.rCall(v, f[4], f[5:], line)
	default:
		return fmt.Errorf("unknown line %q", strings.Join(f, "\t"))
	}
	return nil
}

// rCall records a call line of read_r.R: pkg (may be ""), the hex function name, its arguments.
func (u *unitResult) rCall(pkg, fnHex string, args []string, line int) error {
	fn, err := unhex(fnHex)
	if err != nil {
		return err
	}
	if pkg != "" {
		fn = pkg + "::" + fn
	}
	c := callSite{Func: fn, Line: line}
	for _, a := range args {
		if a == "" {
			continue
		}
		parts := strings.Split(a, ":")
		if len(parts) != 3 {
			return fmt.Errorf("bad argument %q", a)
		}
		name, err1 := unhex(parts[0])
		value, err2 := unhex(parts[2])
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		c.Args = append(c.Args, callArg{Name: name, Kind: parts[1], Value: value})
	}
	u.Calls = append(u.Calls, c)
	return nil
}

// unhex decodes a hex field of read_r.R ("-" is empty).
func unhex(s string) (string, error) {
	if s == "-" {
		return "", nil
	}
	b, err := hex.DecodeString(s)
	return string(b), err
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
