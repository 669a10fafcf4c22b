package lazyre_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/lazyre"
)

func TestCompiledOnceOnFirstUse(t *testing.T) {
	re := lazyre.New(`^a+$`)
	first := re()
	if !first.MatchString("aaa") || first.MatchString("ab") {
		t.Fatal("does not match as ^a+$")
	}
	if re() != first {
		t.Fatal("compiled again on the second call")
	}
	bad := lazyre.New(`(`) // no panic until used
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid expression did not panic on first use")
		}
	}()
	bad()
}

// Every lazyre.New (and the root package's lazyRegexp) in the module is given a constant that compiles: what
// regexp.MustCompile at initialisation used to check at every start is
// checked here, for expressions no test may happen to reach.
func TestEveryExpressionInTheModuleCompiles(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "artifacts") {
				return filepath.SkipDir // not the module's code (.git, .ci/node, fixtures)
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		if filepath.Base(filepath.Dir(p)) == "lazyre" && strings.HasSuffix(p, "_test.go") {
			return nil // this file's deliberately invalid one
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if !isLazyCall(call) {
				return true
			}
			expr, ok := constString(call.Args[0])
			if !ok {
				t.Errorf("%s: a lazy regexp of a non-constant", fset.Position(call.Pos()))
				return true
			}
			found++
			if _, err := regexp.Compile(expr); err != nil {
				t.Errorf("%s: %v", fset.Position(call.Pos()), err)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 20 {
		t.Fatalf("found %d lazyre.New calls; the walk missed the module", found)
	}
}

// isLazyCall reports whether call is lazyre.New(x) or the root package's
// lazyRegexp(x).
func isLazyCall(call *ast.CallExpr) bool {
	if len(call.Args) != 1 {
		return false
	}
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name == "lazyRegexp"
	case *ast.SelectorExpr:
		id, ok := f.X.(*ast.Ident)
		return ok && id.Name == "lazyre" && f.Sel.Name == "New"
	}
	return false
}

// constString evaluates a string literal or a + of string literals.
func constString(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := constString(x.X)
		b, ok2 := constString(x.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return constString(x.X)
	}
	return "", false
}
