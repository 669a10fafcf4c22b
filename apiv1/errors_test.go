package apiv1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/apiv1"
)

// Every code of the table has one error status, and no code appears twice.
func TestEveryCodeHasAStatus(t *testing.T) {
	seen := map[string]bool{}
	for _, code := range apiv1.Codes() {
		if seen[code] {
			t.Errorf("%q is in the table twice", code)
		}
		seen[code] = true
		s, ok := apiv1.LookupStatus(code)
		if !ok || s < 400 || s > 599 || http.StatusText(s) == "" {
			t.Errorf("%q maps to %d (%v), want a 4xx or 5xx status", code, s, ok)
		}
		if apiv1.ErrorStatus(code) != s {
			t.Errorf("ErrorStatus(%q) = %d, LookupStatus gives %d", code, apiv1.ErrorStatus(code), s)
		}
	}
	if s := apiv1.ErrorStatus("no_such_code"); s != http.StatusInternalServerError {
		t.Errorf("an unknown code maps to %d, want 500", s)
	}
	if s := apiv1.ErrorStatus(apiv1.EMETHODNOTALLOWED); s != http.StatusMethodNotAllowed {
		t.Errorf("method_not_allowed maps to %d", s)
	}
}

// Every error code the domain defines (the E… string constants of the root
// package's errors.go) is in the table, so a new code cannot go out as an
// unplanned 500.
func TestEveryDomainCodeIsInTheTable(t *testing.T) {
	codes := domainCodes(t)
	if len(codes) < 10 {
		t.Fatalf("found only %d codes in ../errors.go: %v", len(codes), codes)
	}
	for name, code := range codes {
		if _, ok := apiv1.LookupStatus(code); !ok {
			t.Errorf("dotlab.%s = %q is not in apiv1's status table", name, code)
		}
	}
}

// domainCodes reads the string constants named E… from ../errors.go.
func domainCodes(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if len(name.Name) < 2 || name.Name[0] != 'E' || name.Name != strings.ToUpper(name.Name) || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes[name.Name] = v
			}
		}
	}
	return codes
}

func TestCursor(t *testing.T) {
	for _, s := range []string{"", "0.0", "12.5"} {
		c, err := apiv1.ParseCursor(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if s != "" && c.String() != s {
			t.Errorf("%q reads back as %q", s, c.String())
		}
	}
	for _, s := range []string{"12", "a.b", "-1.0", "1.-1", "1.2.3"} {
		if _, err := apiv1.ParseCursor(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
