package scaffold

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
)

func TestNeedOfDebianPaths(t *testing.T) {
	for p, want := range map[string]struct {
		n       need
		own, ok bool
	}{
		"usr/lib/python3/dist-packages/sklearn/__init__.py":                           {need{NeedPython, "sklearn"}, true, true},
		"usr/lib/python3/dist-packages/sklearn/linear_model/_base.py":                 {need{NeedPython, "sklearn"}, false, true},
		"usr/lib/python3/dist-packages/six.py":                                        {need{NeedPython, "six"}, true, true},
		"usr/lib/python3/dist-packages/_cffi_backend.cpython-311-x86_64-linux-gnu.so": {need{NeedPython, "_cffi_backend"}, true, true},
		"usr/lib/python3/dist-packages/numpy-1.24.2.egg-info/PKG-INFO":                {ok: false},
		"usr/lib/python3/dist-packages/zope.interface-5.5.2-nspkg.pth":                {ok: false},
		"usr/lib/R/site-library/httr/DESCRIPTION":                                     {need{NeedR, "httr"}, true, true},
		"usr/lib/R/library/MASS/DESCRIPTION":                                          {need{NeedR, "MASS"}, true, true},
		"usr/lib/R/site-library/httr/R/httr":                                          {ok: false},
		"usr/bin/pandoc":                                                              {need{NeedCommand, "pandoc"}, true, true},
		"usr/bin/x86_64-linux-gnu/thing":                                              {ok: false},
		"usr/share/doc/python3-sklearn/copyright":                                     {ok: false},
		"usr/lib/python3.11/json/__init__.py":                                         {ok: false},
	} {
		n, own, ok := needOf(p)
		if ok != want.ok || ok && (n != want.n || own != want.own) {
			t.Errorf("needOf(%s) = %v %v %v, want %v %v %v", p, n, own, ok, want.n, want.own, want.ok)
		}
	}
	// An owner wins over a package that only ships a part of a namespace.
	ix := newDebIndex()
	ix.add("/usr/lib/python3/dist-packages/google/protobuf/__init__.py", "python3-protobuf")
	ix.add("/usr/lib/python3/dist-packages/google/__init__.py", "python3-google-common")
	if pkg, ok := ix.lookup(need{NeedPython, "google"}); !ok || pkg != "python3-google-common" {
		t.Errorf("google: %s %v", pkg, ok)
	}
}

func TestAptSources(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "sources.list")
	writeFile(t, list, "# comment\ndeb-src http://src.example/debian bookworm main\n"+
		"deb [ arch=amd64 signed-by=/usr/share/keyrings/k.gpg ] http://one.example/debian bookworm main contrib # trailing\n"+
		"deb [arch=amd64] http://security.example/debian-security bookworm-security main\ndeb [broken\n")
	deb822 := filepath.Join(dir, "debian.sources")
	writeFile(t, deb822, "Types: deb deb-src\nURIs: http://two.example/debian\nSuites: trixie trixie-updates\nComponents: main\n\n"+
		"Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: sid\nComponents: main\n")
	got := readAptSources([]string{list, deb822, filepath.Join(dir, "missing.list")})
	want := []aptSource{
		{uri: "http://one.example/debian", suites: []string{"bookworm"}, components: []string{"main", "contrib"}},
		{uri: "http://security.example/debian-security", suites: []string{"bookworm-security"}, components: []string{"main"}},
		{uri: "http://two.example/debian", suites: []string{"trixie", "trixie-updates"}, components: []string{"main"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sources %+v\nwant %+v", got, want)
	}
	for suite, wantURI := range map[string]string{"trixie": "http://two.example/debian", "bookworm": "http://one.example/debian", "": "http://one.example/debian", "bullseye": "http://one.example/debian"} {
		uri, chosen, _, err := mirrorFor(got, suite)
		if err != nil || uri != wantURI || suite != "" && chosen != suite || suite == "" && chosen != "bookworm" {
			t.Errorf("mirrorFor(%q) = %s %s %v", suite, uri, chosen, err)
		}
	}
	if _, _, _, err := mirrorFor(got[1:2], ""); err == nil || !strings.Contains(err.Error(), "no Debian mirror") {
		t.Errorf("security only: %v", err)
	}
	rel := releaseSHA256("MD5Sum:\n 0123 5 main/Contents-all.gz\nSHA256:\n " + strings.Repeat("AB", 32) + " 12 main/Contents-all.gz\n bad line\nAcquire-By-Hash: yes\n")
	if len(rel) != 1 || rel["main/Contents-all.gz"] != (fileSum{strings.Repeat("ab", 32), 12}) {
		t.Errorf("release %v", rel)
	}
}

// Source built to trouble a parser (deep nesting, NUL bytes, an unclosed
// string, bytes that are not UTF-8) gives a parse error for its unit, not
// a failed reader, and the other units are still read.
func TestReadersOnHostileSource(t *testing.T) {
	testfix.Need(t, false, "python3", "Rscript")
	ctx := context.Background()
	deep := strings.Repeat("(", 100000) + strings.Repeat(")", 100000)
	py, err := readPython(ctx, "python3", []string{deep, "x = '\x00'\n", "s = '''open\n", "import ok_module\n", strings.Repeat("[", 50000) + strings.Repeat("]", 50000)})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range py.results {
		if (i == 3) != (r.Error == "") {
			t.Errorf("python unit %d: error %q", i, r.Error)
		}
	}
	if len(py.results[3].Imports) != 1 || py.results[3].Imports[0].Name != "ok_module" || !py.builtin["json"] {
		t.Errorf("python: %+v", py.results[3])
	}
	r, err := readR(ctx, "Rscript", []string{deep, "x <- \"open\n", "library(okpkg)\n", "s <- '\xff\xfe'\n", strings.Repeat("{", 50000) + strings.Repeat("}", 50000)})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range r.results {
		if (i == 2 || i == 3) != (u.Error == "") {
			t.Errorf("R unit %d: error %q", i, u.Error)
		}
	}
	if got := importsOf(LangR, r.results[2]); len(got) != 1 || got[0].Name != "okpkg" || !r.builtin["stats"] {
		t.Errorf("R: %+v", r.results[2])
	}
}

func TestClassifyCalls(t *testing.T) {
	r := unitResult{Calls: []callSite{
		{Func: "file", Line: 1, Args: []callArg{{Kind: "str", Value: "stdin"}}},
		{Func: "file", Line: 2, Args: []callArg{{Kind: "str", Value: "data.csv"}}},
		{Func: "httr2::req_perform", Line: 3},
		{Func: "cat", Line: 4, Args: []callArg{{Kind: "str", Value: "x"}, {Name: "file", Kind: "str", Value: "out/log.txt"}}},
		{Func: "cat", Line: 5, Args: []callArg{{Kind: "str", Value: "x"}, {Name: "file", Kind: "std", Value: "stderr"}}},
		{Func: "sink", Line: 5, Args: []callArg{{Kind: "num", Value: "NULL"}}},
		{Func: "pdf", Line: 11, Args: []callArg{{Kind: "sym", Value: "path"}}},
		{Func: "write.csv", Line: 6, Args: []callArg{{Kind: "sym", Value: "d"}, {Kind: "str", Value: "/work/out/d.csv"}}},
		{Func: "png", Line: 7, Args: []callArg{{Name: "filename", Kind: "str", Value: "~/fig.png"}}},
	}, Strings: []stringSite{{Value: "https://x.org/a.csv", Line: 8, Func: "paste0"}, {Value: "~ x + y", Line: 9}, {Value: `\\server\share\d.csv`, Line: 10}}}
	var got []string
	for _, f := range classify(codeUnit{file: "a.R", lang: LangR, line: 1}, r) {
		got = append(got, f.Where+" "+f.Kind+" "+f.What)
	}
	want := []string{"a.R:1 interactive file()", "a.R:3 network httr2::req_perform()", `a.R:4 writes cat("out/log.txt")`, `a.R:10 host-path "\\\\server\\share\\d.csv"`, "a.R:11 writes pdf(<a path computed at run time>)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings\n%q\nwant\n%q", got, want)
	}
	py := unitResult{Calls: []callSite{
		{Func: "open", Line: 1, Args: []callArg{{Kind: "str", Value: "in.csv"}}},
		{Func: "open", Line: 2, Args: []callArg{{Kind: "str", Value: "out.txt"}, {Name: "mode", Kind: "str", Value: "a"}}},
		{Func: "numpy.save", Line: 3, Args: []callArg{{Kind: "str", Value: "arr.npy"}, {Kind: "sym", Value: "a"}}},
		{Func: "urllib.parse.urlencode", Line: 4},
		{Func: "sys.stdin.readline", Line: 5},
	}, Strings: []stringSite{{Value: "ftp://x.org/a", Line: 6, Func: "pandas.read_csv"}, {Value: "http://x", Line: 7, Func: "print"}}}
	got = nil
	for _, f := range classify(codeUnit{file: "nb.ipynb", lang: LangPython, line: 1, cell: 3, fetches: []int{9}}, py) {
		got = append(got, f.Where+" "+f.Kind+" "+f.What)
	}
	want = []string{`nb.ipynb cell 3 line 2 writes open("out.txt")`, `nb.ipynb cell 3 line 3 writes numpy.save("arr.npy")`, "nb.ipynb cell 3 line 5 interactive sys.stdin.readline()",
		`nb.ipynb cell 3 line 6 network pandas.read_csv("ftp://x.org/a")`, "nb.ipynb cell 3 line 9 network a shell escape that installs or downloads"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings\n%q\nwant\n%q", got, want)
	}
}
