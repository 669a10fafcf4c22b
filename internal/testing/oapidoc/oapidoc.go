// Package oapidoc reads spec/openapi.yaml for the tests that hold the
// document to the server (spec/openapi_test.go, internal/testing/oapiclient): its
// operations, its schemas and the validation of JSON bodies against them
// (JSON Schema 2020-12, the dialect of OpenAPI 3.1). Only tests import it.
package oapidoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// Methods are the HTTP methods an OpenAPI path item may hold, in the
// document's lower case.
var Methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// docURL names the document for the schema compiler.
const docURL = "https://dotlab.online/spec/openapi.json"

// Doc is a parsed OpenAPI document.
type Doc struct {
	// Root is the document as JSON values (map[string]any, []any, string,
	// float64 or int, bool, nil).
	Root map[string]any

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by JSON pointer
}

// Operation is one operation of the document.
type Operation struct {
	Method string // upper case: GET, POST, PUT
	Path   string // the path template, e.g. /claims/{id}
	ID     string // operationId
	Node   map[string]any
}

// Load parses an OpenAPI document written in YAML (or JSON). Every mapping
// key must be a string (quote status codes), so that the document is JSON.
func Load(data []byte) (*Doc, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v, err := jsonValue(v, "$")
	if err != nil {
		return nil, err
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the document is not a mapping")
	}
	return &Doc{Root: root, schemas: map[string]*jsonschema.Schema{}}, nil
}

// jsonValue returns v with every mapping a map[string]any, or an error
// naming the first mapping with a key that is not a string.
func jsonValue(v any, at string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			j, err := jsonValue(e, at+"."+k)
			if err != nil {
				return nil, err
			}
			x[k] = j
		}
		return x, nil
	case map[any]any:
		return nil, fmt.Errorf("%s: a mapping key is not a string (quote it)", at)
	case []any:
		for i, e := range x {
			j, err := jsonValue(e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			x[i] = j
		}
	}
	return v, nil
}

// Operations returns every operation, ordered by path and method.
func (d *Doc) Operations() []Operation {
	paths, _ := d.Root["paths"].(map[string]any)
	var ops []Operation
	for _, p := range SortedKeys(paths) {
		item, _ := paths[p].(map[string]any)
		for _, m := range Methods {
			node, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			id, _ := node["operationId"].(string)
			ops = append(ops, Operation{Method: strings.ToUpper(m), Path: p, ID: id, Node: node})
		}
	}
	return ops
}

// Match returns the operation that serves method on a concrete path (e.g.
// /claims/DL-0001, no query), matching each {name} to one segment.
func (d *Doc) Match(method, path string) (Operation, bool) {
	segs := strings.Split(path, "/")
	var best Operation
	found, bestWild := false, 0
	for _, op := range d.Operations() {
		if op.Method != method {
			continue
		}
		tsegs := strings.Split(op.Path, "/")
		if len(tsegs) != len(segs) {
			continue
		}
		wild, ok := 0, true
		for i, t := range tsegs {
			if strings.HasPrefix(t, "{") {
				wild++
			} else if t != segs[i] {
				ok = false
				break
			}
		}
		// A literal segment wins over a wildcard (/jobs/next over /jobs/{id}).
		if ok && (!found || wild < bestWild) {
			best, found, bestWild = op, true, wild
		}
	}
	return best, found
}

// Lookup returns the value at a local reference ("#/components/…").
func (d *Doc) Lookup(ref string) (any, error) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("%q is not a local reference", ref)
	}
	var v any = d.Root
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %q is not in a mapping", ref, tok)
		}
		if v, ok = m[tok]; !ok {
			return nil, fmt.Errorf("%s: no %q", ref, tok)
		}
	}
	return v, nil
}

// Deref follows node's $ref (and the $ref of what it points at) to the
// node itself, returning it and the pointer it was found at ("" when node
// has no $ref).
func (d *Doc) Deref(node map[string]any) (map[string]any, string, error) {
	ptr := ""
	for i := 0; i < 32; i++ {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node, ptr, nil
		}
		v, err := d.Lookup(ref)
		if err != nil {
			return nil, "", err
		}
		if node, ok = v.(map[string]any); !ok {
			return nil, "", fmt.Errorf("%s is not a mapping", ref)
		}
		ptr = strings.TrimPrefix(ref, "#")
	}
	return nil, "", fmt.Errorf("$ref chain too long")
}

// Schema returns components.schemas[name].
func (d *Doc) Schema(name string) (map[string]any, bool) {
	v, err := d.Lookup("#/components/schemas/" + name)
	m, ok := v.(map[string]any)
	return m, err == nil && ok
}

// Responses returns the operation's responses by status ("200", "404"),
// each with its $ref followed, and the JSON pointer of each.
func (d *Doc) Responses(op Operation) (map[string]map[string]any, map[string]string, error) {
	rs, _ := op.Node["responses"].(map[string]any)
	out, ptrs := map[string]map[string]any{}, map[string]string{}
	for status, v := range rs {
		r, _ := v.(map[string]any)
		res, ptr, err := d.Deref(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s %s: %w", op.Method, op.Path, status, err)
		}
		if ptr == "" {
			ptr = "/paths/" + escape(op.Path) + "/" + strings.ToLower(op.Method) + "/responses/" + status
		}
		out[status], ptrs[status] = res, ptr
	}
	return out, ptrs, nil
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// ValidateResponse checks a response the server gave to op: its status is
// declared, and a JSON body is valid under the declared schema. The body of
// another media type only has to be declared.
func (d *Doc) ValidateResponse(op Operation, status int, contentType string, body []byte) error {
	rs, ptrs, err := d.Responses(op)
	if err != nil {
		return err
	}
	code := fmt.Sprint(status)
	res, ok := rs[code]
	if !ok {
		return fmt.Errorf("%s %s answered %d, which the document does not declare (%s)", op.Method, op.Path, status, strings.Join(SortedKeys(rs), ", "))
	}
	content, _ := res["content"].(map[string]any)
	mt := strings.TrimSpace(strings.Split(contentType, ";")[0])
	if len(content) == 0 {
		if len(body) > 0 && status != http.StatusNoContent {
			return fmt.Errorf("%s %s %d: a body (%s) where the document declares none", op.Method, op.Path, status, mt)
		}
		return nil
	}
	if _, ok := content[mt]; !ok {
		return fmt.Errorf("%s %s %d: media type %q is not declared (%s)", op.Method, op.Path, status, mt, strings.Join(SortedKeys(content), ", "))
	}
	if mt != "application/json" {
		return nil
	}
	return d.Validate(ptrs[code]+"/content/application~1json/schema", body)
}

// Validate checks a JSON body against the schema at a JSON pointer of the
// document (e.g. /components/schemas/Run).
func (d *Doc) Validate(pointer string, body []byte) error {
	sch, err := d.compile(pointer)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%s: %v", pointer, err)
	}
	return nil
}

// compile returns the compiled schema at pointer, compiling the document
// as one resource the first time.
func (d *Doc) compile(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[pointer]; ok {
		return s, nil
	}
	if d.compiler == nil {
		b, err := json.Marshal(d.Root)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(docURL, doc); err != nil {
			return nil, err
		}
		d.compiler = c
	}
	s, err := d.compiler.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	d.schemas[pointer] = s
	return s, nil
}

// SortedKeys returns m's keys in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
