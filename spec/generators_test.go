package spec_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/spec"
	"gopkg.in/yaml.v3"
)

// generatorProblems lists the shapes of an OpenAPI document (parsed YAML)
// that third-party generators read wrongly (issue 26: openapi-python-client
// dropped operations and models over the first three, ogen rejected new
// fields over the last):
//   - a `type` list of object and "null" (an inline nullable map or
//     object): name the schema and make it nullable by
//     `anyOf: [{$ref: …}, {type: "null"}]`;
//   - an `allOf` of a single `$ref` beside `properties` or `required`, or
//     as a request or response body (read as an alias, losing its own
//     fields): put them in an allOf member of their own;
//   - an inline allOf member whose `required` names a property it does not
//     list in its `properties` (a required-only member, which
//     openapi-typescript turns into Record<string, never>);
//   - `additionalProperties: false` or `unevaluatedProperties: false` on a
//     schema a response reaches (responses stay open).
//
// Each problem names its JSON pointer.
func generatorProblems(doc map[string]any) []string {
	var out []string
	bodies := bodySchemas(doc)
	walkSchemas(doc, "#", func(at string, s map[string]any) {
		out = append(out, shapeProblems(at, s, bodies[at])...)
	})
	for _, ptr := range reachable(doc, "responses") {
		s, _ := lookup(doc, ptr).(map[string]any)
		walkSchemas(s, ptr, func(at string, n map[string]any) {
			for _, k := range []string{"additionalProperties", "unevaluatedProperties"} {
				if n[k] == false {
					out = append(out, fmt.Sprintf("%s: %s: false on a schema a response uses (responses stay open)", at, k))
				}
			}
		})
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// shapeProblems are the problems of one schema node at pointer at (body:
// a request or response body refers to it).
func shapeProblems(at string, s map[string]any, body bool) []string {
	var out []string
	if ts, ok := s["type"].([]any); ok && slices.Contains(ts, any("object")) && slices.Contains(ts, any("null")) {
		out = append(out, at+`: type [object, "null"]: name the schema and use anyOf [{$ref}, {type: "null"}]`)
	}
	all, _ := s["allOf"].([]any)
	if len(all) == 1 {
		m, _ := all[0].(map[string]any)
		_, props := s["properties"]
		_, req := s["required"]
		if _, ref := m["$ref"]; ref && (props || req || body) {
			out = append(out, at+": allOf of a single $ref beside properties or required, or as a body: give the fields an allOf member of their own")
		}
	}
	for i, a := range all {
		m, _ := a.(map[string]any)
		if _, ref := m["$ref"]; ref {
			continue
		}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		for _, r := range req {
			if _, ok := props[fmt.Sprint(r)]; !ok {
				out = append(out, fmt.Sprintf("%s/allOf/%d: requires %v without listing it in its properties", at, i, r))
			}
		}
	}
	return out
}

// walkSchemas calls fn on every map in v (with its JSON pointer), deepest
// last; generated extensions (x-…) are not walked.
func walkSchemas(v any, at string, fn func(string, map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(at, x)
		for _, k := range sortedKeys(x) {
			if !strings.HasPrefix(k, "x-") {
				walkSchemas(x[k], at+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), fn)
			}
		}
	case []any:
		for i, e := range x {
			walkSchemas(e, fmt.Sprintf("%s/%d", at, i), fn)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lookup resolves a local JSON pointer ("#/a/b") in doc; nil if absent.
func lookup(doc map[string]any, ptr string) any {
	var v any = doc
	for _, p := range strings.Split(strings.TrimPrefix(ptr, "#/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")]
	}
	return v
}

// bodySchemas are the pointers of the component schemas a request or
// response body refers to directly.
func bodySchemas(doc map[string]any) map[string]bool {
	out := map[string]bool{}
	walkSchemas(doc["paths"], "#/paths", func(at string, m map[string]any) {
		if strings.HasSuffix(at, "/schema") {
			if ref, ok := m["$ref"].(string); ok {
				out[ref] = true
			}
		}
	})
	return out
}

// reachable lists the pointers of every component schema the operations'
// part (requestBody or responses) reaches, $refs followed.
func reachable(doc map[string]any, part string) []string {
	seen := map[string]bool{}
	var visit func(v any)
	visit = func(v any) {
		walkSchemas(v, "", func(_ string, m map[string]any) {
			ref, ok := m["$ref"].(string)
			if !ok || seen[ref] || !strings.HasPrefix(ref, "#/components/schemas/") {
				if ok && !seen[ref] && strings.HasPrefix(ref, "#/components/responses/") {
					seen[ref] = true
					visit(lookup(doc, ref))
				}
				return
			}
			seen[ref] = true
			visit(lookup(doc, ref))
		})
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		ops, _ := item.(map[string]any)
		for _, op := range ops {
			if m, ok := op.(map[string]any); ok {
				visit(m[part])
			}
		}
	}
	var out []string
	for ref := range seen {
		if strings.HasPrefix(ref, "#/components/schemas/") {
			out = append(out, ref)
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIGeneratorShapes: spec/openapi.yaml has none of the shapes
// generatorProblems refuses.
func TestOpenAPIGeneratorShapes(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(spec.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range generatorProblems(doc) {
		t.Error(p)
	}
}

// TestGeneratorShapesRefused: generatorProblems finds each shape that broke
// a generator, in small documents that have it, and passes their fixed
// forms.
func TestGeneratorShapesRefused(t *testing.T) {
	const head = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\n"
	body := head + `paths:
  /x:
    post:
      requestBody: {content: {application/json: {schema: {$ref: "#/components/schemas/Body"}}}}
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Out"}}}}
components:
  schemas:
    Base: {type: object, properties: {a: {type: string}}}
`
	cases := []struct{ name, doc, want string }{
		{"nullable map", body + "    Body: {type: object, properties: {h: {type: [object, 'null'], additionalProperties: {type: string}}}}\n    Out: {type: object}\n",
			`type [object, "null"]`},
		{"single-ref allOf with properties", body + "    Body: {allOf: [{$ref: '#/components/schemas/Base'}], properties: {b: {type: string}}}\n    Out: {type: object}\n",
			"allOf of a single $ref"},
		{"single-ref allOf as a body", body + "    Body: {allOf: [{$ref: '#/components/schemas/Base'}], unevaluatedProperties: false}\n    Out: {type: object}\n",
			"allOf of a single $ref"},
		{"required-only member", body + "    Body: {type: object}\n    Out: {allOf: [{$ref: '#/components/schemas/Base'}, {type: object, required: [a]}]}\n",
			"requires a without listing it"},
		{"open response", body + "    Body: {type: object}\n    Out: {type: object, properties: {e: {$ref: '#/components/schemas/Base'}}}\n",
			""},
		{"closed schema in a response", strings.Replace(body, "Base: {type: object,", "Base: {type: object, additionalProperties: false,", 1) +
			"    Body: {type: object}\n    Out: {type: object, properties: {e: {$ref: '#/components/schemas/Base'}}}\n", "additionalProperties: false on a schema a response uses"},
		{"fixed", body + "    Body: {allOf: [{$ref: '#/components/schemas/Base'}, {type: object, required: [h], properties: {h: {anyOf: [{$ref: '#/components/schemas/Map'}, {type: 'null'}]}}}], unevaluatedProperties: false}\n    Map: {type: object, additionalProperties: {type: string}}\n    Out: {allOf: [{$ref: '#/components/schemas/Base'}, {type: object, required: [a], properties: {a: {type: string}}}]}\n",
			""},
	}
	for _, c := range cases {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(c.doc), &doc); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := strings.Join(generatorProblems(doc), "\n")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: problems %q, want one with %q", c.name, got, c.want)
		}
	}
}
