// Package strictjson parses untrusted JSON (manifests, run bodies,
// results.json, lab messages) strictly, as docs/manifest-spec.md "4. Strict
// JSON parsing" describes: duplicate keys and keys differing only in case are errors (Go's
// encoding/json keeps the last duplicate and matches case-insensitively),
// numbers are kept as their decimal text (json.Number), and invalid UTF-8,
// trailing data, excessive size or nesting depth are errors. Every error
// names the JSON path where it occurred ("$.targets[2].name").
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits bound what Parse accepts.
type Limits struct {
	MaxBytes int // total input size in bytes
	MaxDepth int // nesting depth of objects and arrays
}

// DefaultLimits accept 1 MiB of JSON nested at most 32 deep.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 32}

// SyntaxError is a problem at a JSON path.
type SyntaxError struct {
	Path string
	Msg  string
}

func (e *SyntaxError) Error() string { return e.Path + ": " + e.Msg }

// Parse parses data with DefaultLimits. Objects become map[string]any,
// arrays []any, numbers json.Number, and strings, booleans and null their Go
// values.
func Parse(data []byte) (any, error) { return ParseLimits(data, DefaultLimits) }

// ParseLimits parses data with the given limits.
func ParseLimits(data []byte, lim Limits) (any, error) {
	if lim.MaxBytes > 0 && len(data) > lim.MaxBytes {
		return nil, &SyntaxError{"$", fmt.Sprintf("document is %d bytes; at most %d are accepted", len(data), lim.MaxBytes)}
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, &SyntaxError{"$", fmt.Sprintf("invalid UTF-8 at byte offset %d", off)}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, &SyntaxError{"$", "starts with a UTF-8 byte order mark: send plain UTF-8 JSON without a BOM"}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &SyntaxError{"$", "empty document: expected a JSON value"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &parser{dec: dec, maxDepth: lim.MaxDepth}
	v, err := p.value("$", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &SyntaxError{"$", fmt.Sprintf("trailing data after the JSON value at byte offset %d", dec.InputOffset())}
	}
	return v, nil
}

type parser struct {
	dec      *json.Decoder
	maxDepth int
}

func (p *parser) token(path string) (json.Token, error) {
	t, err := p.dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, &SyntaxError{path, "unexpected end of JSON input"}
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &SyntaxError{path, fmt.Sprintf("%s (byte offset %d)", se.Error(), se.Offset)}
		}
		return nil, &SyntaxError{path, err.Error()}
	}
	return t, nil
}

func (p *parser) value(path string, depth int) (any, error) {
	t, err := p.token(path)
	if err != nil {
		return nil, err
	}
	return p.fromToken(t, path, depth)
}

func (p *parser) fromToken(t json.Token, path string, depth int) (any, error) {
	switch d := t.(type) {
	case json.Delim:
		if p.maxDepth > 0 && depth >= p.maxDepth {
			return nil, &SyntaxError{path, fmt.Sprintf("nested deeper than %d levels", p.maxDepth)}
		}
		switch d {
		case '{':
			obj := map[string]any{}
			folded := map[string]string{}
			for p.dec.More() {
				kt, err := p.token(path)
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, &SyntaxError{path, "object key must be a string"}
				}
				kp := childPath(path, k)
				if strings.ContainsRune(k, 0) {
					return nil, &SyntaxError{path, "an object key contains a NUL character (\\u0000), which is not accepted"}
				}
				if _, dup := obj[k]; dup {
					return nil, &SyntaxError{kp, fmt.Sprintf("duplicate key %q: each key may appear once", k)}
				}
				low := strings.ToLower(k)
				if prev, clash := folded[low]; clash {
					return nil, &SyntaxError{kp, fmt.Sprintf("key %q differs from key %q only in case", k, prev)}
				}
				folded[low] = k
				v, err := p.value(kp, depth+1)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := p.token(path); err != nil { // '}'
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; p.dec.More(); i++ {
				v, err := p.value(fmt.Sprintf("%s[%d]", path, i), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := p.token(path); err != nil { // ']'
				return nil, err
			}
			return arr, nil
		}
		return nil, &SyntaxError{path, fmt.Sprintf("unexpected %q", rune(d))}
	case string:
		if strings.ContainsRune(d, 0) {
			return nil, &SyntaxError{path, "contains a NUL character (\\u0000), which is not accepted in any text"}
		}
		return d, nil
	default:
		return t, nil
	}
}

func childPath(path, key string) string {
	simple := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			simple = false
			break
		}
	}
	if simple {
		return path + "." + key
	}
	b, _ := json.Marshal(key)
	return path + "[" + string(b) + "]"
}

// Decode parses data strictly (Parse) and then decodes it into v, a pointer
// to a struct. Object keys must equal a field's json name exactly (case
// sensitive); every unknown key is reported by path. Numbers must fit the
// field's type. The returned error is a *ProblemsError listing every problem.
func Decode(data []byte, v any) error { return DecodeLimits(data, DefaultLimits, v) }

// DecodeLimits is Decode with explicit limits.
func DecodeLimits(data []byte, lim Limits, v any) error {
	_, err := decode(data, lim, v, false)
	return err
}

// DecodeRest is DecodeLimits that, when the JSON parses but some of its
// values do not fit v (unknown fields, wrong types: the *ProblemsError
// lists each), still decodes the values that do into v, leaving the others
// at their zero value, so that the caller can check the rest of the body
// and answer every problem at once. rest says v holds that decoded rest;
// it is false when the text is not JSON (or over lim) and v is untouched.
func DecodeRest(data []byte, lim Limits, v any) (rest bool, err error) {
	return decode(data, lim, v, true)
}

func decode(data []byte, lim Limits, v any, keepRest bool) (bool, error) {
	tree, err := ParseLimits(data, lim)
	if err != nil {
		return false, &ProblemsError{Problems: []string{err.Error()}}
	}
	var probs []string
	fits := checkKeys(tree, reflect.TypeOf(v), "$", &probs)
	if len(probs) > 0 {
		rest := false
		if keepRest && fits {
			if b, err := json.Marshal(tree); err == nil {
				rest = json.Unmarshal(b, v) == nil
			}
		}
		return rest, &ProblemsError{Problems: probs}
	}
	err = unmarshal(data, v)
	return err == nil, err
}

// unmarshal is json.Unmarshal with its type error named by JSON path.
func unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			path := "$"
			if te.Field != "" {
				path += "." + te.Field
			}
			return &ProblemsError{Problems: []string{fmt.Sprintf("%s: expected %s, got JSON %s", path, typeName(te.Type), te.Value)}}
		}
		return &ProblemsError{Problems: []string{"$: " + err.Error()}}
	}
	return nil
}

// ProblemsError lists path-addressed problems found while decoding.
type ProblemsError struct {
	Problems []string
}

func (e *ProblemsError) Error() string { return strings.Join(e.Problems, "; ") }

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64, reflect.Int32,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

var (
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	rawMessageType  = reflect.TypeOf(json.RawMessage(nil))
)

// kindMismatch returns what t expects when node does not fit it ("" when it
// fits or the check is left to encoding/json).
func kindMismatch(node any, t reflect.Type) string {
	ok := true
	switch t.Kind() {
	case reflect.String:
		_, ok = node.(string)
	case reflect.Bool:
		_, ok = node.(bool)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		_, ok = node.(json.Number)
	case reflect.Slice, reflect.Array:
		_, ok = node.([]any)
	case reflect.Struct, reflect.Map:
		_, ok = node.(map[string]any)
	case reflect.Interface:
		return ""
	}
	if ok {
		return ""
	}
	return typeName(t)
}

func jsonKind(node any) string {
	switch node.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// checkKeys appends a problem for each value of node that does not fit t
// (by JSON path) and removes it from node (an object's key is deleted, an
// array's element set to null), so that what is left decodes. It returns
// false when node itself does not fit t.
func checkKeys(node any, t reflect.Type, path string, probs *[]string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if node == nil {
		return true // null leaves the zero value
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if t == rawMessageType {
			return true
		}
		// Run the type's own decoding on this value, to report its error
		// with the JSON path.
		b, err := json.Marshal(node)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(b)
		}
		if err != nil {
			*probs = append(*probs, fmt.Sprintf("%s: %v", path, err))
			return false
		}
		return true
	}
	if want := kindMismatch(node, t); want != "" {
		*probs = append(*probs, fmt.Sprintf("%s: expected %s, got %s", path, want, jsonKind(node)))
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		checkObject(node, t, path, probs)
	case reflect.Slice, reflect.Array:
		if arr, ok := node.([]any); ok {
			for i, e := range arr {
				if !checkKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), probs) {
					arr[i] = nil
				}
			}
		}
	case reflect.Map:
		if obj, ok := node.(map[string]any); ok {
			for _, k := range sortedKeys(obj) {
				if !checkKeys(obj[k], t.Elem(), childPath(path, k), probs) {
					delete(obj, k)
				}
			}
		}
	}
	return true
}

// checkObject is checkKeys of an object decoded into struct type t.
func checkObject(node any, t reflect.Type, path string, probs *[]string) {
	obj, ok := node.(map[string]any)
	if !ok {
		return // type mismatch is reported by json.Unmarshal
	}
	fields := jsonFields(t)
	for _, k := range sortedKeys(obj) {
		ft, ok := fields[k]
		if !ok {
			*probs = append(*probs, fmt.Sprintf("%s: unknown field %q (allowed: %s)", childPath(path, k), k, strings.Join(sortedKeys(fields), ", ")))
			delete(obj, k)
			continue
		}
		if !checkKeys(obj[k], ft, childPath(path, k), probs) {
			delete(obj, k)
		}
	}
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
