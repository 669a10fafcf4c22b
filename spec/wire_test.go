package spec_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/internal/testing/oapidoc"
)

// wireOp is what an operation's handler reads and writes: the Go type of
// its JSON request body (nil: none, or not JSON) and of each success
// status's JSON body (nil: no body, or not JSON).
type wireOp struct {
	req  any
	resp map[string]any
}

// wireTypes are the Go wire types of every operation (httpapi's handlers;
// errors are all apiv1.ErrorBody). A new field on one of them must be
// declared in the operation's schema, and a new operation listed here.
var wireTypes = map[string]wireOp{
	"getStatus":           {resp: map[string]any{"200": apiv1.Status{}}},
	"getSummary":          {resp: map[string]any{"200": apiv1.SummaryView{}}},
	"createAgent":         {req: dotlab.NewAgent{}, resp: map[string]any{"201": apiv1.AgentCreated{}}},
	"getAgentMe":          {resp: map[string]any{"200": dotlab.AgentProfile{}}},
	"getAgent":            {resp: map[string]any{"200": dotlab.AgentProfile{}}},
	"getAgentActivity":    {resp: map[string]any{"200": apiv1.ActivityPage{}}},
	"createClaim":         {req: apiv1.ClaimSubmission{}, resp: map[string]any{"201": apiv1.ClaimView{}}},
	"listClaims":          {resp: map[string]any{"200": apiv1.ClaimPage{}}},
	"getClaim":            {resp: map[string]any{"200": apiv1.ClaimView{}}},
	"getClaimManifest":    {resp: map[string]any{"200": dotlab.Manifest{}}},
	"getClaimEvents":      {resp: map[string]any{"200": apiv1.ClaimEventList{}}},
	"listChallenges":      {resp: map[string]any{"200": apiv1.ChallengeList{}}},
	"putClaimInput":       {resp: map[string]any{"200": dotlab.ArchivedInput{}, "201": dotlab.ArchivedInput{}}},
	"getClaimInput":       {resp: map[string]any{"200": nil}},
	"reportClaimCanary":   {req: apiv1.CanaryBody{}, resp: map[string]any{"200": apiv1.CanaryList{}}},
	"getClaimCanary":      {resp: map[string]any{"200": apiv1.CanaryList{}}},
	"nextJob":             {resp: map[string]any{"200": dotlab.Job{}, "204": nil}},
	"acceptJob":           {resp: map[string]any{"200": dotlab.Job{}}},
	"declineJob":          {req: apiv1.DeclineBody{}, resp: map[string]any{"200": dotlab.Job{}}},
	"putJobLogs":          {resp: map[string]any{"200": apiv1.LogsStored{}}},
	"getJobLogs":          {resp: map[string]any{"200": nil}},
	"putJobOutputs":       {resp: map[string]any{"200": dotlab.OutputListing{}}},
	"getRunOutputs":       {resp: map[string]any{"200": nil}},
	"getChallengeOutputs": {resp: map[string]any{"200": nil}},
	"publishRun":          {req: dotlab.RunBody{}, resp: map[string]any{"201": apiv1.PublishedRun{}}},
	"listRuns":            {resp: map[string]any{"200": apiv1.RunPage{}}},
	"getRun":              {resp: map[string]any{"200": dotlab.Run{}}},
	"getLog":              {resp: map[string]any{"200": apiv1.LogInfo{}}},
	"getLogEntry":         {resp: map[string]any{"200": apiv1.LogEntry{}}},
	"getLogClaim":         {resp: map[string]any{"200": apiv1.LogClaim{}}},
	"getLogConsistency":   {resp: map[string]any{"200": apiv1.LogConsistency{}}},
	"createChallenge":     {req: dotlab.ChallengeBody{}, resp: map[string]any{"201": dotlab.Challenge{}}},
	"nextDispute":         {resp: map[string]any{"200": dotlab.Dispute{}, "204": nil}},
	"getDispute":          {resp: map[string]any{"200": dotlab.Dispute{}}},
	"castVote":            {req: dotlab.VoteBody{}, resp: map[string]any{"200": dotlab.Dispute{}}},
	"commitVote":          {req: dotlab.CommitBody{}, resp: map[string]any{"200": dotlab.Dispute{}}},
	"revealVote":          {req: dotlab.RevealBody{}, resp: map[string]any{"200": dotlab.Dispute{}}},
	"joinLab":             {req: apiv1.JoinBody{}, resp: map[string]any{"200": dotlab.LabMember{}}},
	"listLabMembers":      {resp: map[string]any{"200": apiv1.MemberList{}}},
	"listLabMessages":     {resp: map[string]any{"200": apiv1.MessagePage{}}},
	"postLabMessage":      {req: dotlab.LabMessageBody{}, resp: map[string]any{"201": dotlab.LabMessage{}}},
	"streamLabEvents":     {resp: map[string]any{"200": nil}},
}

// TestOpenAPIWireTypes: every JSON field of every wire type is declared in
// the operation's schema, with a matching type, and the schema declares
// nothing else; a field the server always writes (no omitempty) is
// required in a response. Request schemas are closed (the server refuses
// unknown fields) and response schemas open (clients ignore new fields).
func TestOpenAPIWireTypes(t *testing.T) {
	doc := loadDoc(t)
	w := &wireCheck{t: t, doc: doc, shared: requestSchemas(t, doc), said: map[string]bool{}}
	ops := map[string]bool{}
	for _, op := range doc.Operations() {
		ops[op.ID] = true
		wt, ok := wireTypes[op.ID]
		if !ok {
			t.Errorf("operation %s has no entry in wireTypes (spec/wire_test.go)", op.ID)
			continue
		}
		w.checkRequest(op, wt.req)
		w.checkResponses(op, wt.resp)
	}
	for id := range wireTypes {
		if !ops[id] {
			t.Errorf("wireTypes lists %s, which spec/openapi.yaml does not have", id)
		}
	}
	w.object("Error", "/components/schemas/Error", schema(t, doc, "Error"), reflect.TypeOf(apiv1.ErrorBody{}), true)
}

type wireCheck struct {
	t      *testing.T
	said   map[string]bool // problems reported (each once)
	doc    *oapidoc.Doc
	shared map[string]bool // components reachable from a request body
}

func schema(t *testing.T, doc *oapidoc.Doc, name string) map[string]any {
	t.Helper()
	s, ok := doc.Schema(name)
	if !ok {
		t.Fatalf("no components.schemas.%s", name)
	}
	return s
}

func jsonSchemaOf(content any) (map[string]any, bool) {
	c, _ := content.(map[string]any)
	mt, ok := c["application/json"].(map[string]any)
	if !ok {
		return nil, false
	}
	s, ok := mt["schema"].(map[string]any)
	return s, ok
}

func (w *wireCheck) checkRequest(op oapidoc.Operation, req any) {
	rb, _ := op.Node["requestBody"].(map[string]any)
	s, ok := jsonSchemaOf(rb["content"])
	switch {
	case req == nil && ok:
		w.errorf("%s reads no JSON body, but declares one", op.ID)
	case req != nil && !ok:
		w.errorf("%s reads a JSON body (%T), but declares none", op.ID, req)
	case req != nil:
		top, ptr := w.deref(s)
		if top["additionalProperties"] != false && top["unevaluatedProperties"] != false {
			w.errorf("%s: the request schema %s must be closed (additionalProperties or unevaluatedProperties false): the server refuses unknown fields", op.ID, ptr)
		}
		w.value(op.ID+" request", s, reflect.TypeOf(req), false)
	}
}

func (w *wireCheck) checkResponses(op oapidoc.Operation, resp map[string]any) {
	rs, _, err := w.doc.Responses(op)
	if err != nil {
		w.t.Fatal(err)
	}
	for status, res := range rs {
		if !strings.HasPrefix(status, "2") {
			continue
		}
		goType, listed := resp[status]
		s, isJSON := jsonSchemaOf(res["content"])
		what := op.ID + " " + status
		switch {
		case !listed:
			w.errorf("%s: the document declares it; list its Go type in wireTypes", what)
		case goType == nil && isJSON:
			w.errorf("%s: the server writes no JSON body, but a JSON schema is declared", what)
		case goType != nil && !isJSON:
			w.errorf("%s: the server writes %T, but no JSON schema is declared", what, goType)
		case goType != nil:
			top, ptr := w.deref(s)
			if top["additionalProperties"] == false {
				w.errorf("%s: the response schema %s must stay open (no additionalProperties: false)", what, ptr)
			}
			w.value(what, s, reflect.TypeOf(goType), true)
		}
	}
	for status := range resp {
		if _, ok := rs[status]; !ok {
			w.errorf("%s: wireTypes lists status %s, which the document does not declare", op.ID, status)
		}
	}
}

// errorf reports a problem once, however many operations reach it.
func (w *wireCheck) errorf(format string, args ...any) {
	w.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if !w.said[msg] {
		w.said[msg] = true
		w.t.Error(msg)
	}
}

// deref follows s's $ref chain.
func (w *wireCheck) deref(s map[string]any) (map[string]any, string) {
	d, ptr, err := w.doc.Deref(s)
	if err != nil {
		w.t.Fatal(err)
	}
	return d, ptr
}

var (
	decimalType = reflect.TypeOf(dotlab.Decimal(""))
	timeType    = reflect.TypeOf(time.Time{})
	rawType     = reflect.TypeOf(json.RawMessage{})
)

// value checks the schema s of a value of Go type t at what.
func (w *wireCheck) value(what string, s map[string]any, t reflect.Type, resp bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	types, format := w.typeOf(s)
	want := ""
	switch {
	case t == rawType || t.Kind() == reflect.Interface:
		return // any JSON value
	case t == decimalType:
		want = "number"
		// A manifest's numbers fit a double (RFC 8785); every other
		// decimal is the Decimal schema, format decimal.
		if format != "decimal" && (format != "double" || !strings.Contains(strings.ToLower(what), "manifest")) {
			w.errorf("%s: a decimal (dotlab.Decimal) must be the Decimal schema (type number, format decimal; in a manifest format double), not %v %q", what, types, format)
		}
	case t == timeType:
		want = "string"
	default:
		want = jsonKind(t)
	}
	if types != nil && !slices.Contains(types, want) {
		w.errorf("%s: Go %s is a JSON %s; the schema says %v", what, t, want, types)
	}
	switch {
	case t == decimalType || t == timeType:
	case t.Kind() == reflect.Struct:
		d, ptr := w.deref(s)
		w.object(what, ptr, d, t, resp)
	case t.Kind() == reflect.Slice:
		if items, ok := w.find(s, "items"); ok {
			w.value(what+"[]", items, t.Elem(), resp)
		} else {
			w.errorf("%s: an array schema without items", what)
		}
	case t.Kind() == reflect.Map:
		w.mapValues(what, s, t.Elem(), resp)
	}
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.Kind().String()
}

// mapValues checks a Go map's values against additionalProperties, or
// against each declared property when the keys are a fixed set.
func (w *wireCheck) mapValues(what string, s map[string]any, elem reflect.Type, resp bool) {
	if ap, ok := w.find(s, "additionalProperties"); ok {
		w.value(what+"{}", ap, elem, resp)
		return
	}
	props := w.props(s)
	if len(props) == 0 {
		w.errorf("%s: a map needs additionalProperties (or the properties of its keys)", what)
	}
	for k, p := range props {
		w.value(what+"."+k, p, elem, resp)
	}
}

// goField is one JSON field of a Go struct, as encoding/json writes it.
type goField struct {
	name      string
	typ       reflect.Type
	omitempty bool
	goName    string
}

// jsonFields lists t's JSON fields, embedded structs flattened as
// encoding/json does.
func jsonFields(t reflect.Type) []goField {
	var out []goField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, goField{name: name, typ: f.Type, omitempty: omit, goName: t.Name() + "." + f.Name})
	}
	return out
}

// object checks a struct against an object schema (its properties and
// those of its allOf members): the same fields both ways, and in a
// response every always-written field required, unless the schema is
// shared with a request (where those fields are optional).
func (w *wireCheck) object(what, ptr string, s map[string]any, t reflect.Type, resp bool) {
	if ptr == "" {
		ptr = "(inline)"
	}
	props, required := w.props(s), w.required(s)
	fields := map[string]bool{}
	shared := w.shared[ptr]
	for _, f := range jsonFields(t) {
		fields[f.name] = true
		p, ok := props[f.name]
		if !ok {
			w.errorf("%s: %s (%s) is not declared in the schema %s", what, f.name, f.goName, ptr)
			continue
		}
		if resp && !f.omitempty && !shared && !required[f.name] {
			w.errorf("%s: %s is always written (%s has no omitempty), so it must be required in %s", what, f.name, f.goName, ptr)
		}
		w.value(what+"."+f.name, p, f.typ, resp)
	}
	for name := range props {
		if !fields[name] {
			w.errorf("%s: the schema %s declares %s, which %s does not have", what, ptr, name, t)
		}
	}
}

// props returns s's properties, with those of its allOf members.
func (w *wireCheck) props(s map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	w.each(s, func(n map[string]any) {
		ps, _ := n["properties"].(map[string]any)
		for k, v := range ps {
			if m, ok := v.(map[string]any); ok {
				out[k] = m
			}
		}
	})
	return out
}

func (w *wireCheck) required(s map[string]any) map[string]bool {
	out := map[string]bool{}
	w.each(s, func(n map[string]any) {
		rs, _ := n["required"].([]any)
		for _, r := range rs {
			out[fmt.Sprint(r)] = true
		}
	})
	return out
}

// each calls fn on s and on every allOf member, and on the members of a
// nullable anyOf (a schema and {type: null}), $refs followed.
func (w *wireCheck) each(s map[string]any, fn func(map[string]any)) {
	d, _ := w.deref(s)
	fn(d)
	all, _ := d["allOf"].([]any)
	nullable, _ := d["anyOf"].([]any)
	for _, a := range append(slices.Clip(all), nullable...) {
		if m, ok := a.(map[string]any); ok {
			w.each(m, fn)
		}
	}
}

// find returns the first value of keyword in s or its allOf members.
func (w *wireCheck) find(s map[string]any, keyword string) (map[string]any, bool) {
	var out map[string]any
	w.each(s, func(n map[string]any) {
		if m, ok := n[keyword].(map[string]any); ok && out == nil {
			out = m
		}
	})
	return out, out != nil
}

// typeOf returns s's JSON types (nil when it states none, e.g. a oneOf)
// and its format, $refs and allOf members included.
func (w *wireCheck) typeOf(s map[string]any) ([]string, string) {
	var types []string
	format := ""
	w.each(s, func(n map[string]any) {
		switch t := n["type"].(type) {
		case string:
			types = append(types, t)
		case []any:
			for _, e := range t {
				types = append(types, fmt.Sprint(e))
			}
		}
		if f, ok := n["format"].(string); ok && format == "" {
			format = f
		}
	})
	return types, format
}

// requestSchemas returns the pointers of every component schema a request
// body reaches.
func requestSchemas(t *testing.T, doc *oapidoc.Doc) map[string]bool {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				ptr := strings.TrimPrefix(ref, "#")
				if seen[ptr] {
					return
				}
				seen[ptr] = true
				target, err := doc.Lookup(ref)
				if err != nil {
					t.Fatal(err)
				}
				walk(target)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, op := range doc.Operations() {
		walk(op.Node["requestBody"])
	}
	return seen
}

// TestOpenAPINumbersAreWide: no number in the document can be read as 32
// bits: every `type: number` schema says `format: double`, but the Decimal
// schema, which says `format: decimal` and gives oapi-codegen (which reads
// an unknown format as float32) json.Number, the exact text.
func TestOpenAPINumbersAreWide(t *testing.T) {
	doc := loadDoc(t)
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch x := v.(type) {
		case map[string]any:
			var types []string
			switch ty := x["type"].(type) {
			case string:
				types = []string{ty}
			case []any:
				for _, e := range ty {
					types = append(types, fmt.Sprint(e))
				}
			}
			decimal := at == "#/components/schemas/Decimal" && x["format"] == "decimal" && x["x-go-type"] == "json.Number"
			if slices.Contains(types, "number") && x["format"] != "double" && !decimal {
				t.Errorf("%s: type number without format: double (generators read it as float32); a decimal is the Decimal schema", at)
			}
			for _, k := range oapidoc.SortedKeys(x) {
				walk(at+"/"+k, x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s/%d", at, i), e)
			}
		}
	}
	walk("#", doc.Root)
}
