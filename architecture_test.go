package dotlab_test

// Architecture tests (in the style of transparency-dev/tessera's): the
// import graph and the size rules of README "Architecture" are checked by
// `go test ./...`, so a change that breaks the layering fails CI rather
// than a review. They read `go list -json ./...` and the Go sources.

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/dotlab/dotlab"

// serverPackages hold server code: no agent-side package may link them.
var serverPackages = []string{module + "/httpapi", module + "/sqlstore", module + "/web", module + "/leakcheck", module + "/server", module + "/translog"}

type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	Imports    []string
	Deps       []string
	GoFiles    []string
}

func listPackages(t *testing.T) map[string]listedPackage {
	return goList(t, "-json", func(p listedPackage) string { return p.ImportPath })
}

// goList decodes `go list <format> ./...` (a -json flag) into one P per
// package, by the import path path gives.
func goList[P any](t *testing.T, format string, path func(P) string) map[string]P {
	t.Helper()
	cmd := exec.Command("go", "list", format, "./...")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errOut.String())
	}
	pkgs := map[string]P{}
	dec := json.NewDecoder(&out)
	for {
		var p P
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[path(p)] = p
	}
	return pkgs
}

func isServer(path string) bool {
	for _, s := range serverPackages {
		if path == s || strings.HasPrefix(path, s+"/") {
			return true
		}
	}
	return false
}

// TestAgentSideLinksNoServerCode: client and agent (and everything they
// depend on) never import a server package, so an agent binary carries no
// server code.
func TestAgentSideLinksNoServerCode(t *testing.T) {
	pkgs := listPackages(t)
	for _, name := range []string{module + "/client", module + "/agent", module + "/apiv1", module + "/runner", module + "/tlogfmt", module + "/verify", module + "/mcpserver"} {
		p, ok := pkgs[name]
		if !ok {
			t.Errorf("package %s not found", name)
			continue
		}
		for _, d := range p.Deps {
			if isServer(d) {
				t.Errorf("%s depends on the server package %s", name, d)
			}
		}
	}
}

// TestRootPackageIsStandardLibraryOnly: the domain (package dotlab) imports
// nothing but the standard library.
func TestRootPackageIsStandardLibraryOnly(t *testing.T) {
	pkgs := listPackages(t)
	root := pkgs[module]
	for _, imp := range root.Imports {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
			t.Errorf("the root package imports %s", imp)
		}
	}
}

// TestNothingImportsCmd: commands only wire; no package depends on them
// but the command itself on its own helpers (cmd/dotlab/internal/...).
func TestNothingImportsCmd(t *testing.T) {
	for name, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/cmd/") && !strings.HasPrefix(name+"/", commandOf(imp)+"/") {
				t.Errorf("%s imports %s", name, imp)
			}
		}
	}
}

// commandOf is the command a cmd/ package belongs to: cmd/dotlab for
// cmd/dotlab/internal/cli.
func commandOf(path string) string {
	rest := strings.TrimPrefix(path, module+"/cmd/")
	name, _, _ := strings.Cut(rest, "/")
	return module + "/cmd/" + name
}

// agentCommandFiles are the cmd/dotlab files of commands an agent runs:
// they may not import server packages (serve.go and demo.go wire those).
var agentCommandFiles = []string{"agent.go", "agentloops.go", "lab.go", "rerun.go", "claim.go", "manifest.go", "image.go", "verify.go", "mcp.go"}

// TestAgentCommandsImportNoServerPackage checks the agent commands'
// sources file by file.
func TestAgentCommandsImportNoServerPackage(t *testing.T) {
	dir := filepath.Join("cmd", "dotlab")
	for _, name := range agentCommandFiles {
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if isServer(p) {
				t.Errorf("%s imports the server package %s", path, p)
			}
		}
	}
}

// maxFuncLines bounds every function outside tests and benchmarks.
const maxFuncLines = 80

// longFuncExceptions lists functions allowed past maxFuncLines, each with
// its reason (also given in the closing note).
var longFuncExceptions = map[string]string{}

// TestFunctionsAreShort: no non-test function is longer than maxFuncLines.
// Generated files (a "Code generated … DO NOT EDIT." header) are skipped.
func TestFunctionsAreShort(t *testing.T) {
	var long []string
	for _, p := range listPackages(t) {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if ast.IsGenerated(f) {
				continue // generated code (internal/testing/oapiclient/client.gen.go) is not ours to shorten
			}
			rel, _ := filepath.Rel(mustGetwd(t), path)
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
				key := rel + ":" + funcName(fn)
				if n > maxFuncLines {
					if _, ok := longFuncExceptions[key]; !ok {
						long = append(long, key+" ("+strconv.Itoa(n)+" lines)")
					}
				}
			}
		}
	}
	sort.Strings(long)
	for _, l := range long {
		t.Errorf("function over %d lines: %s", maxFuncLines, l)
	}
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// maxCmdLines bounds cmd/dotlab's non-test code: it holds cobra commands
// and their flags only, the long help texts living in cmd/dotlab/help/
// (the aim was about 700 lines; the wiring of 29 commands is about
// 910). A guard against logic creeping back into cmd.
const maxCmdLines = 950

func TestCmdOnlyWires(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("cmd", "dotlab", "*.go"))
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if gen, err := parser.ParseFile(token.NewFileSet(), f, data, parser.ParseComments|parser.PackageClauseOnly); err != nil {
			t.Fatal(err)
		} else if ast.IsGenerated(gen) {
			continue // generated code is excluded by its header, as in TestFunctionsAreShort
		}
		total += bytes.Count(data, []byte("\n"))
	}
	if total > maxCmdLines {
		t.Errorf("cmd/dotlab holds %d lines of non-test code; at most %d (move logic into packages)", total, maxCmdLines)
	}
}

// storePackages hold persistence: the protocol's contract (store) and its
// SQL implementation (sqlstore).
var storePackages = []string{module + "/store", module + "/sqlstore"}

func isStore(path string) bool {
	for _, s := range storePackages {
		if path == s || strings.HasPrefix(path, s+"/") {
			return true
		}
	}
	return false
}

// routeMarks are what an API route looks like in a string literal.
var routeMarks = []string{"/api/v1", "GET /", "POST /", "PUT /", "DELETE /"}

// TestNoRouteStringsInDomainOrStore: the root package, the store and the
// protocol service name protocol steps (dotlab.Step), never routes; route
// hints are added at the HTTP edge (httpapi/steps.go). String literals of
// non-test files are checked (comments may say which route a type serves).
func TestNoRouteStringsInDomainOrStore(t *testing.T) {
	pkgs := listPackages(t)
	for _, name := range []string{module, module + "/protocol", module + "/store", module + "/sqlstore"} {
		p, ok := pkgs[name]
		if !ok {
			t.Errorf("package %s not found", name)
			continue
		}
		for _, file := range p.GoFiles {
			path := filepath.Join(p.Dir, file)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range routeMarks {
					if strings.Contains(lit.Value, m) {
						t.Errorf("%s: a route string (%q) in %s: name a dotlab.Step and let the edge give its route", fset.Position(lit.Pos()), m, name)
					}
				}
				return true
			})
		}
	}
}

// TestHTTPAPIImportsNoStore: the API calls the protocol service; it
// reaches storage only through it.
func TestHTTPAPIImportsNoStore(t *testing.T) {
	p := listPackages(t)[module+"/httpapi"]
	for _, imp := range p.Imports {
		if isStore(imp) {
			t.Errorf("httpapi imports the store package %s", imp)
		}
	}
}

// TestStoreImportsNoScreens: the secret screen (leakcheck), signatures
// (attest) and URL rules (internal/netpolicy) are the protocol service's
// checks; the store persists what passed them.
func TestStoreImportsNoScreens(t *testing.T) {
	banned := []string{module + "/leakcheck", module + "/attest", module + "/internal/netpolicy"}
	for name, p := range listPackages(t) {
		if !isStore(name) {
			continue
		}
		for _, imp := range p.Imports {
			for _, b := range banned {
				if imp == b {
					t.Errorf("%s imports %s", name, imp)
				}
			}
		}
	}
}

// testKits is the folder of the packages only tests use: fixtures, the
// in-process and process servers, the generated API client and the other
// test kits (a house that shows its rooms: production code never lives
// there, and nothing test-only lives elsewhere).
const testKits = module + "/internal/testing/"

// TestTestKitsLiveTogether: every package that tests import but no
// program (a main package: dotlab, the bench tools) reaches through
// non-test imports lives under testKits, and the product (cmd/) reaches
// nothing under testKits.
func TestTestKitsLiveTogether(t *testing.T) {
	pkgs := listPackagesWithTests(t)
	byProgram, byProduct := map[string]bool{}, map[string]bool{}
	testImported := map[string]bool{}
	for name, p := range pkgs {
		if p.Name == "main" {
			reach(pkgs, name, byProgram)
			if strings.HasPrefix(name, module+"/cmd/") {
				reach(pkgs, name, byProduct)
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			testImported[imp] = true
		}
	}
	for name, p := range pkgs {
		kit := strings.HasPrefix(name, testKits)
		switch {
		case p.Name == "main":
		case kit && byProduct[name]:
			t.Errorf("%s is a test kit, but the command imports it", name)
		case !kit && testImported[name] && !byProgram[name]:
			t.Errorf("%s is imported only by tests: move it under %s", name, testKits)
		}
	}
}

// reach marks p and every module package it imports, transitively, in seen.
func reach(pkgs map[string]testedPackage, p string, seen map[string]bool) {
	if seen[p] {
		return
	}
	seen[p] = true
	for _, imp := range pkgs[p].Imports {
		if _, ok := pkgs[imp]; ok {
			reach(pkgs, imp, seen)
		}
	}
}

type testedPackage struct {
	ImportPath, Name          string
	Imports                   []string
	TestImports, XTestImports []string
}

// listPackagesWithTests is `go list -json ./...` with the imports of each
// package's tests.
func listPackagesWithTests(t *testing.T) map[string]testedPackage {
	return goList(t, "-json=ImportPath,Name,Imports,TestImports,XTestImports", func(p testedPackage) string { return p.ImportPath })
}

// TestGeneratedCodeIsMarked: a generated file says so in the standard
// header (ast.IsGenerated), which is what excludes it from the size rules
// (TestFunctionsAreShort, TestCmdOnlyWires), never its path; every
// generated file lives with the test kits.
func TestGeneratedCodeIsMarked(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			gen := ast.IsGenerated(f)
			if strings.Contains(name, ".gen.") && !gen {
				t.Errorf("%s is named generated but has no \"Code generated … DO NOT EDIT.\" header", path)
			}
			if gen && !strings.HasPrefix(p.ImportPath, testKits) {
				t.Errorf("%s is generated but lives outside %s", path, testKits)
			}
		}
	}
}
