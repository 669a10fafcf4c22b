package scaffold

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/internal/lazyre"
)

// HowTo is the how-to that findings cite; each Finding names one of its
// section anchors (docs_test.go checks that they exist).
const HowTo = "docs/howto-replication-package.md"

// The kinds of Finding and the how-to section that answers each.
const (
	FindNetwork     = "network"
	FindInteractive = "interactive"
	FindHostPath    = "host-path"
	FindWrites      = "writes"
)

var findingSection = map[string]string{
	FindNetwork:     "packages-that-download-at-run-time",
	FindInteractive: "interactive-and-platform-only-calls",
	FindHostPath:    "absolute-paths-of-the-authors-machine",
	FindWrites:      "packages-that-write-next-to-their-code-scratch",
}

// SectionMissing is the section on modules the image lacks.
const SectionMissing = "what-manifest-init-reads-in-the-code"

// Finding is a call or literal in the code that fails (or writes) in the
// sandbox: Where is "file:line" (or "file cell N line M"), What the call or
// the literal, Kind one of the Find* constants.
type Finding struct {
	Kind, Where, What string
	// URL is the URL literal a network finding passes ("" when none is
	// written out), so that one pinned with --download is said to be.
	URL  string
	line int // in its unit, for the order
}

// Section is the how-to section (PATH#anchor) that answers the finding.
func (f Finding) Section() string { return HowTo + "#" + findingSection[f.Kind] }

func (f Finding) String() string {
	why := map[string]string{
		FindNetwork:     "reaches the network, which the sandbox does not have",
		FindInteractive: "waits for a person: standard input is empty in the sandbox",
		FindHostPath:    "names a path on the author's machine, which the sandbox does not have",
		FindWrites:      "writes next to the code, which is read-only unless scratch is on",
	}[f.Kind]
	return fmt.Sprintf("%s: %s %s: see %s", f.Where, f.What, why, f.Section())
}

// The names the readers report calls to (Python: by last name or by first
// module; R: by function name or by package).
var (
	watchedPython = []string{"input", "raw_input", "getpass", "read", "readline", "readlines",
		"askopenfilename", "askopenfilenames", "askdirectory", "asksaveasfilename", "fileopenbox", "import_module",
		"open", "to_csv", "to_excel", "to_parquet", "to_stata", "to_json", "to_pickle", "to_latex", "to_html",
		"to_feather", "to_hdf", "to_markdown", "to_file", "savefig", "save", "savetxt", "savez", "savez_compressed",
		"write_csv", "write_parquet", "makedirs", "mkdir", "dump", "urlopen", "urlretrieve"}
	networkPython = []string{"requests", "httpx", "urllib3", "urllib", "aiohttp", "wget", "pycurl", "ftplib", "http",
		"boto3", "gdown", "kaggle", "pooch"}
	watchedR = []string{"library", "require", "requireNamespace", "loadNamespace", "p_load",
		"download.file", "url", "curl", "curl_download", "curl_fetch_memory", "curl_fetch_disk", "getURL", "getURLContent",
		"GET", "POST", "PUT", "HEAD", "PATCH", "VERB", "req_perform", "install.packages", "install_github", "install_version",
		"readline", "readLines", "file", "scan", "file.choose", "choose.dir", "choose.files", "menu", "askYesNo", "tk_choose.files", "tk_choose.dir",
		"selectFile", "selectDirectory",
		"write.csv", "write.csv2", "write.table", "write_csv", "write_tsv", "write_delim", "write_excel_csv", "write_rds",
		"write_xlsx", "write.xlsx", "fwrite", "saveRDS", "save", "save.image", "ggsave", "pdf", "png", "jpeg", "tiff", "bmp",
		"svg", "cairo_pdf", "postscript", "writeLines", "sink", "dir.create", "cat", "write", "capture.output", "write.dta",
		"write_dta", "write_sav", "write_parquet", "write_feather", "stargazer", "saveWidget"}
	networkR = []string{"httr", "httr2", "curl", "RCurl", "remotes", "devtools", "BiocManager", "pak", "googledrive", "aws.s3", "rvest"}
)

// networkCallPython: a call into a module that reaches the network.
var networkCallPython = lazyre.New(`^(requests|httpx|urllib3|aiohttp|wget|pycurl|ftplib|boto3|gdown|kaggle|pooch)\.|^urllib\.request\.|^http\.client\.`)

var interactivePython = map[string]bool{"input": true, "raw_input": true, "getpass.getpass": true,
	"sys.stdin.read": true, "sys.stdin.readline": true, "sys.stdin.readlines": true}

var interactivePythonPrefix = lazyre.New(`^(tkinter\.filedialog|easygui)\.`)

var (
	networkFuncR     = setOf([]string{"download.file", "url", "curl", "curl_download", "curl_fetch_memory", "curl_fetch_disk", "getURL", "getURLContent", "GET", "POST", "PUT", "HEAD", "PATCH", "VERB", "req_perform", "install.packages", "install_github", "install_version"})
	interactiveFuncR = setOf([]string{"readline", "file.choose", "choose.dir", "choose.files", "menu", "askYesNo", "tk_choose.files", "tk_choose.dir", "selectFile", "selectDirectory"})
	networkPkgR      = setOf(networkR)
)

// writeArg is where a writing function takes its file: the position of the
// argument (-1: by name only) and its names.
type writeArg struct {
	pos   int
	names []string
}

var writesPython = map[string]writeArg{
	"to_csv": {0, []string{"path_or_buf"}}, "to_excel": {0, []string{"excel_writer"}}, "to_parquet": {0, []string{"path"}},
	"to_stata": {0, []string{"path"}}, "to_json": {0, []string{"path_or_buf"}}, "to_pickle": {0, []string{"path"}},
	"to_latex": {0, []string{"buf"}}, "to_html": {0, []string{"buf"}}, "to_feather": {0, []string{"path"}},
	"to_hdf": {0, []string{"path_or_buf"}}, "to_markdown": {0, []string{"buf"}}, "to_file": {0, []string{"filename"}},
	"savefig": {0, []string{"fname"}}, "save": {0, []string{"file", "fname"}}, "savetxt": {0, []string{"fname"}},
	"savez": {0, []string{"file"}}, "savez_compressed": {0, []string{"file"}}, "write_csv": {0, []string{"file"}},
	"write_parquet": {0, []string{"file"}}, "makedirs": {0, []string{"name"}}, "mkdir": {0, []string{"path"}},
	"dump": {1, []string{"filename"}}, "urlretrieve": {1, []string{"filename"}},
}

var writesR = map[string]writeArg{
	"write.csv": {1, []string{"file"}}, "write.csv2": {1, []string{"file"}}, "write.table": {1, []string{"file"}},
	"write_csv": {1, []string{"file", "path"}}, "write_tsv": {1, []string{"file", "path"}}, "write_delim": {1, []string{"file", "path"}},
	"write_excel_csv": {1, []string{"file", "path"}}, "write_rds": {1, []string{"file", "path"}}, "write_xlsx": {1, []string{"path"}},
	"write.xlsx": {1, []string{"file"}}, "fwrite": {1, []string{"file"}}, "saveRDS": {1, []string{"file"}}, "save": {-1, []string{"file"}},
	"save.image": {0, []string{"file"}}, "ggsave": {0, []string{"filename"}}, "pdf": {0, []string{"file"}}, "png": {0, []string{"filename"}},
	"jpeg": {0, []string{"filename"}}, "tiff": {0, []string{"filename"}}, "bmp": {0, []string{"filename"}}, "svg": {0, []string{"filename"}},
	"cairo_pdf": {0, []string{"filename"}}, "postscript": {0, []string{"file"}}, "writeLines": {1, []string{"con"}}, "sink": {0, []string{"file"}},
	"dir.create": {0, []string{"path"}}, "cat": {-1, []string{"file"}}, "write": {1, []string{"file"}}, "capture.output": {-1, []string{"file"}},
	"write.dta": {1, []string{"file"}}, "write_dta": {1, []string{"path"}}, "write_sav": {1, []string{"path"}},
	"write_parquet": {1, []string{"sink"}}, "write_feather": {1, []string{"sink"}}, "stargazer": {-1, []string{"out"}}, "saveWidget": {1, []string{"file"}},
	"download.file": {1, []string{"destfile"}},
}

// fileArg is the argument a call passes as its file (w); ok is false when it passes none.
func fileArg(c callSite, w writeArg) (arg callArg, ok bool) {
	pos := 0
	for _, a := range c.Args {
		if a.Name == "" {
			if pos == w.pos {
				return a, true
			}
			pos++
			continue
		}
		for _, n := range w.names {
			if a.Name == n {
				return a, true
			}
		}
	}
	return callArg{}, false
}

var hostPath = lazyre.New(`^([A-Za-z]:[\\/]|\\\\[^\\]|/(Users|home|Volumes|mnt|media)/|~($|/))`)

var urlLiteral = lazyre.New(`^(?i)(https?|ftps?)://`)

// relativeFile: a file name a write resolves against the working directory.
func relativeFile(p string) bool {
	return p != "" && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~") && !strings.HasPrefix(p, `\`) &&
		!hostPath().MatchString(p) && !strings.Contains(p, "://") && p != "-" && p != "stdout" && p != ""
}

// printing are calls whose string arguments are text, not something read.
var printing = setOf([]string{"print", "cat", "message", "paste", "paste0", "sprintf", "format", "warning", "stop", "logging.info", "log.info", "str.format"})

// classify lists the findings in one unit's reader result.
func classify(u codeUnit, r unitResult) []Finding {
	var fs []Finding
	add := func(kind string, line int, format string, args ...any) *Finding {
		fs = append(fs, Finding{Kind: kind, Where: u.at(line), What: fmt.Sprintf(format, args...), line: line})
		return &fs[len(fs)-1]
	}
	for _, n := range u.fetches {
		add(FindNetwork, n, "a shell escape that installs or downloads")
	}
	sort.SliceStable(r.Calls, func(i, j int) bool { return r.Calls[i].Line < r.Calls[j].Line })
	for _, c := range r.Calls {
		switch kind, url := callKind(u.lang, c), callURL(c); {
		case kind == FindNetwork && url != "":
			add(kind, c.Line, "%s(%q)", c.Func, url).URL = url
		case kind != "":
			add(kind, c.Line, "%s()", c.Func)
		}
		switch p := writePath(u.lang, c); p {
		case "":
		case computedPath:
			add(FindWrites, c.Line, "%s(%s)", c.Func, p)
		default:
			add(FindWrites, c.Line, "%s(%q)", c.Func, p)
		}
	}
	sort.SliceStable(r.Strings, func(i, j int) bool { return r.Strings[i].Line < r.Strings[j].Line })
	for _, s := range r.Strings {
		switch {
		case hostPath().MatchString(s.Value):
			add(FindHostPath, s.Line, "%q", s.Value)
		case urlLiteral().MatchString(s.Value) && s.Func != "" && !printing[s.Func] && !networkCall(u.lang, s.Func):
			add(FindNetwork, s.Line, "%s(%q)", s.Func, s.Value).URL = s.Value
		}
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].line < fs[j].line })
	return fs
}

// callURL is the first URL literal among c's arguments, "" for none.
func callURL(c callSite) string {
	for _, a := range c.Args {
		if a.Kind == "str" && urlLiteral().MatchString(a.Value) {
			return a.Value
		}
	}
	return ""
}

// networkCall: a call callKind already reports as network.
func networkCall(lang Language, fn string) bool {
	return callKind(lang, callSite{Func: fn}) == FindNetwork
}

// callKind is FindNetwork or FindInteractive for a call that is one, else "".
func callKind(lang Language, c callSite) string {
	if lang == LangPython {
		switch {
		case networkCallPython().MatchString(c.Func):
			return FindNetwork
		case interactivePython[c.Func] || interactivePythonPrefix().MatchString(c.Func):
			return FindInteractive
		}
		return ""
	}
	pkg, fn, ok := strings.Cut(c.Func, "::")
	if !ok {
		pkg, fn = "", c.Func
	}
	fn = strings.TrimPrefix(fn, ":") // pkg:::fn
	switch {
	case networkFuncR[fn] || networkPkgR[pkg]:
		return FindNetwork
	case interactiveFuncR[fn]:
		return FindInteractive
	case (fn == "readLines" || fn == "file" || fn == "scan") && len(c.Args) > 0 && c.Args[0].Kind == "str" && c.Args[0].Value == "stdin":
		return FindInteractive
	}
	return ""
}

// computedPath stands for a file name known only at run time.
const computedPath = "<a path computed at run time>"

// writePath is the file a writing call writes when it may be next to the
// code: a relative literal, or computedPath; "" for none (no file
// argument, an absolute path).
func writePath(lang Language, c callSite) string {
	last := c.Func
	if i := strings.LastIndexAny(last, ".:"); i >= 0 && lang == LangPython {
		last = last[i+1:]
	} else if _, fn, ok := strings.Cut(last, "::"); ok {
		last = strings.TrimPrefix(fn, ":")
	}
	w, ok := writesR[last]
	if lang == LangPython {
		w, ok = writesPython[last]
	}
	if lang == LangPython && c.Func == "open" {
		mode, _ := fileArg(c, writeArg{1, []string{"mode"}})
		w, ok = writeArg{0, []string{"file"}}, mode.Kind == "str" && strings.ContainsAny(mode.Value, "wax+")
	}
	if !ok {
		return ""
	}
	switch a, ok := fileArg(c, w); {
	case !ok:
		return ""
	case a.Kind == "str" && relativeFile(a.Value):
		return a.Value
	case a.Kind == "sym" || a.Kind == "other":
		return computedPath
	}
	return ""
}
