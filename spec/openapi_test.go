package spec_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/oapidoc"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/spec"
	"github.com/dotlab/dotlab/sqlstore"
)

func loadDoc(t *testing.T) *oapidoc.Doc {
	t.Helper()
	doc, err := oapidoc.Load(spec.OpenAPI)
	if err != nil {
		t.Fatalf("spec/openapi.yaml: %v", err)
	}
	return doc
}

// noStore and noLeaks stand in for the parts httpapi.New requires: listing
// the routes calls neither.
type noStore struct{ httpapi.Store }

type noLeaks struct{}

func (noLeaks) Check(path, text string) error { return nil }

// serverRoutes lists the routes of a server with a transparency log (a
// store on a SQLite file gives it), so the log's routes are listed too.
func serverRoutes(t *testing.T) []httpapi.Route {
	t.Helper()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	if db.Log() == nil {
		t.Fatal("the store opened no transparency log")
	}
	api, err := httpapi.New(httpapi.Config{Store: noStore{}, Leaks: noLeaks{}, Log: db.Log()})
	if err != nil {
		t.Fatal(err)
	}
	return api.Routes()
}

// TestOpenAPIRoutes: every route the server registers is an operation of
// the document and every operation is a route, with security as the route
// has it (an API key, or explicitly none).
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadDoc(t)
	ops := map[string]oapidoc.Operation{}
	for _, op := range doc.Operations() {
		ops[op.Method+" "+op.Path] = op
	}
	routes := serverRoutes(t)
	if len(routes) == 0 {
		t.Fatal("the server lists no routes")
	}
	seen := map[string]bool{}
	for _, r := range routes {
		k := r.Method + " " + r.Path
		seen[k] = true
		op, ok := ops[k]
		if !ok {
			t.Errorf("route %s is not in spec/openapi.yaml", k)
			continue
		}
		sec, ok := op.Node["security"].([]any)
		switch {
		case !ok:
			t.Errorf("%s (%s) declares no security: give [{bearer: []}] or [] (public)", k, op.ID)
		case r.Key && !hasBearer(sec):
			t.Errorf("%s needs an API key; its security must be [{bearer: []}], not %v", k, sec)
		case !r.Key && len(sec) != 0:
			t.Errorf("%s is public; its security must be [], not %v", k, sec)
		}
	}
	for k, op := range ops {
		if !seen[k] {
			t.Errorf("spec/openapi.yaml has %s (%s), which the server does not serve", k, op.ID)
		}
		if op.ID == "" {
			t.Errorf("%s has no operationId", k)
		}
	}
}

func hasBearer(sec []any) bool {
	for _, s := range sec {
		if m, ok := s.(map[string]any); ok {
			if _, ok := m["bearer"]; ok && len(m) == 1 && len(sec) == 1 {
				return true
			}
		}
	}
	return false
}

// TestOpenAPIStatuses: the statuses that follow from an operation's shape
// are declared (the handlers' own errors are listed by hand in the
// document; TestGeneratedClientLifecycle checks every status the server
// gave it is declared): 405, 429 and 500 on every operation, 401 where a
// key is needed, 404 where the path names a record, 413 and 422 where a
// body is read, 422 where the query is. Every error response is the Error
// body, and every status is one of the error table's or a success.
func TestOpenAPIStatuses(t *testing.T) {
	doc := loadDoc(t)
	keyed := map[string]bool{}
	for _, r := range serverRoutes(t) {
		keyed[r.Method+" "+r.Path] = r.Key
	}
	table := map[string]bool{}
	for _, code := range apiv1.Codes() {
		table[fmt.Sprint(apiv1.ErrorStatus(code))] = true
	}
	for _, op := range doc.Operations() {
		name := op.Method + " " + op.Path
		rs, ptrs, err := doc.Responses(op)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range wantStatuses(op, keyed[name]) {
			if _, ok := rs[s]; !ok {
				t.Errorf("%s (%s) does not declare %s", name, op.ID, s)
			}
		}
		for status, res := range rs {
			if !strings.HasPrefix(status, "2") {
				if !table[status] {
					t.Errorf("%s declares %s, which no error code has (apiv1/errors.go)", name, status)
				}
				checkErrorResponse(t, doc, name+" "+status, ptrs[status], res)
			}
		}
	}
}

func wantStatuses(op oapidoc.Operation, key bool) []string {
	want := []string{"405", "429", "500"}
	if key {
		want = append(want, "401")
	}
	if strings.Contains(op.Path, "{") {
		want = append(want, "404")
	}
	if _, ok := op.Node["requestBody"]; ok {
		want = append(want, "413", "422")
	}
	params, _ := op.Node["parameters"].([]any)
	for _, p := range params {
		if m, ok := p.(map[string]any); ok && m["in"] == "query" || refersTo(p, "AfterClaim", "Limit") {
			want = append(want, "422")
		}
	}
	return want
}

func refersTo(p any, names ...string) bool {
	m, _ := p.(map[string]any)
	ref, _ := m["$ref"].(string)
	for _, n := range names {
		if ref == "#/components/parameters/"+n {
			return true
		}
	}
	return false
}

// checkErrorResponse: an error response is application/json with the
// Error schema.
func checkErrorResponse(t *testing.T, doc *oapidoc.Doc, what, ptr string, res map[string]any) {
	t.Helper()
	content, _ := res["content"].(map[string]any)
	mt, _ := content["application/json"].(map[string]any)
	schema, _ := mt["schema"].(map[string]any)
	if len(content) != 1 || schema["$ref"] != "#/components/schemas/Error" {
		t.Errorf("%s (%s): an error response must be application/json with the Error schema", what, ptr)
	}
	if desc, _ := res["description"].(string); desc == "" {
		t.Errorf("%s: no description", what)
	}
}

// TestOpenAPIErrorCodes: the Error schema's codes are the error table's
// (apiv1/errors.go), in its order.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadDoc(t)
	v, err := doc.Lookup("#/components/schemas/Error/properties/error/enum")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range v.([]any) {
		got = append(got, fmt.Sprint(c))
	}
	if want := apiv1.Codes(); !slices.Equal(got, want) {
		t.Errorf("Error.error enum is %v;\nthe error table (apiv1/errors.go) has %v", got, want)
	}
	for _, c := range apiv1.Codes() {
		if s := apiv1.ErrorStatus(c); s < 400 || s > 599 || http.StatusText(s) == "" {
			t.Errorf("%s has status %d", c, s)
		}
	}
}
