package spec_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/spec"
)

// update rewrites the generated schema copies in openapi.yaml:
//
//	go test ./spec -run TestSchemaCopies -update
var update = flag.Bool("update", false, "rewrite the generated schema copies in spec/openapi.yaml")

// The markers around the generated copies in openapi.yaml (under
// components.schemas, indented four spaces).
const (
	beginCopies = "    # BEGIN GENERATED SCHEMA COPIES\n"
	endCopies   = "    # END GENERATED SCHEMA COPIES\n"
)

// copySource is a standalone schema file and the components it becomes:
// the file itself as Name, and each of its $defs under the name Defs gives
// (a def whose name an earlier source wrote already is not written again).
// An Open copy leaves out every "additionalProperties": false, so that
// responses, which must stay open, can declare the same shape.
type copySource struct {
	File string
	Data []byte
	Name string
	Defs map[string]string
	Open bool
}

func copySources() []copySource {
	return []copySource{
		{File: "manifest.schema.json", Data: spec.ManifestSchema, Name: "Manifest",
			Defs: map[string]string{"source": "ManifestTargetSource", "sha256": "SHA256"}},
		{File: "manifest.schema.json", Data: spec.ManifestSchema, Name: "ManifestView", Open: true,
			Defs: map[string]string{"source": "ManifestTargetSourceView", "sha256": "SHA256"}},
		{File: "lab-message.schema.json", Data: spec.LabMessageSchema, Name: "LabMessageBody"},
	}
}

// TestSchemaCopies: openapi.yaml holds the published standalone schemas
// (manifest, lab message) as components, so that the document is one
// self-contained file generators accept. The copies are the standalone
// files with $schema and $id left out, their $defs moved to components
// and every "#/$defs/X" reference pointed there; nothing else differs,
// but that the open copies (ManifestView, which responses use) leave out
// "additionalProperties": false. Run with -update after changing a
// standalone schema.
func TestSchemaCopies(t *testing.T) {
	var b strings.Builder
	b.WriteString(beginCopies)
	written := map[string]bool{}
	for _, src := range copySources() {
		block, err := componentCopies(src, written)
		if err != nil {
			t.Fatalf("%s: %v", src.File, err)
		}
		b.WriteString(block)
	}
	want := b.String()
	doc := string(spec.OpenAPI)
	i, j := strings.Index(doc, beginCopies), strings.Index(doc, endCopies)
	if i < 0 || j < i {
		t.Fatalf("openapi.yaml lacks the lines %q and %q under components.schemas", beginCopies, endCopies)
	}
	if doc[i:j] == want {
		return
	}
	if !*update {
		t.Fatal("spec/openapi.yaml's copies of manifest.schema.json and lab-message.schema.json are out of date: run go test ./spec -run TestSchemaCopies -update")
	}
	if err := os.WriteFile("openapi.yaml", []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("rewrote the schema copies in spec/openapi.yaml")
}

// componentCopies writes src's components as YAML mapping entries whose
// values are JSON (which YAML reads as flow mappings), indented for
// components.schemas, skipping (and adding to written) the names written.
func componentCopies(src copySource, written map[string]bool) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(src.Data))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return "", err
	}
	top, ok := v.(object)
	if !ok {
		return "", fmt.Errorf("not a JSON object")
	}
	refs := map[string]string{}
	for from, to := range src.Defs {
		refs["#/$defs/"+from] = "#/components/schemas/" + to
	}
	var main object
	var defs object
	for _, m := range top {
		switch m.key {
		case "$schema", "$id":
		case "$defs":
			if defs, ok = m.val.(object); !ok {
				return "", fmt.Errorf("$defs is not an object")
			}
		default:
			main = append(main, m)
		}
	}
	out := []member{{src.Name, main}}
	for _, d := range defs {
		name, ok := src.Defs[d.key]
		if !ok {
			return "", fmt.Errorf("$defs.%s has no component name: add it to copySources", d.key)
		}
		out = append(out, member{name, d.val})
	}
	var b strings.Builder
	for _, c := range out {
		if written[c.key] {
			continue
		}
		written[c.key] = true
		v := rewriteRefs(c.val, refs)
		if src.Open {
			v = openObjects(v)
		}
		text, err := indentJSON(v)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "    %s:\n      %s\n", c.key, text)
	}
	return b.String(), nil
}

// rewriteRefs returns v with every "$ref" value found in refs replaced; a
// reference refs does not know is left as it is.
func rewriteRefs(v any, refs map[string]string) any {
	switch x := v.(type) {
	case object:
		out := make(object, len(x))
		for i, m := range x {
			if s, ok := m.val.(string); ok && m.key == "$ref" && refs[s] != "" {
				m.val = refs[s]
			}
			out[i] = member{m.key, rewriteRefs(m.val, refs)}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = rewriteRefs(e, refs)
		}
		return out
	}
	return v
}

// openObjects returns v without any "additionalProperties": false member.
func openObjects(v any) any {
	switch x := v.(type) {
	case object:
		out := make(object, 0, len(x))
		for _, m := range x {
			if b, ok := m.val.(bool); ok && !b && m.key == "additionalProperties" {
				continue
			}
			out = append(out, member{m.key, openObjects(m.val)})
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = openObjects(e)
		}
		return out
	}
	return v
}

// object is a JSON object that keeps its members' order.
type object []member

type member struct {
	key string
	val any
}

// decodeOrdered reads one JSON value, objects as object (in order), arrays
// as []any, numbers as json.Number (the decoder must UseNumber).
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, member{k.(string), v})
		}
		_, err := dec.Token()
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// indentJSON writes v as indented JSON (no HTML escaping), continuation
// lines indented six spaces.
func indentJSON(v any) (string, error) {
	var compact bytes.Buffer
	if err := writeJSON(&compact, v); err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "      ", "  "); err != nil {
		return "", err
	}
	return out.String(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case object:
		b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, m.key); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, m.val); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(string(x))
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(x); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	return nil
}
