package spec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/spec"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// predicateSources are the published predicate schemas and the request
// body component each is generated from (docs/verification.md §7).
// A v2 predicate (bound) is {log_origin, agent_id, body}.
var predicateSources = []struct {
	file, component, predicateType string
	bound                          bool
}{
	{"predicate-run-v1.schema.json", "RunBody", attest.PredicateRun, false},
	{"predicate-challenge-v1.schema.json", "ChallengeBody", attest.PredicateChallenge, false},
	{"predicate-vote-v1.schema.json", "VoteBody", attest.PredicateVote, false},
	{"predicate-run-v2.schema.json", "RunBody", attest.PredicateRunV2, true},
	{"predicate-challenge-v2.schema.json", "ChallengeBody", attest.PredicateChallengeV2, true},
	{"predicate-vote-v2.schema.json", "VoteBody", attest.PredicateVoteV2, true},
}

// sharedObjects are the components request bodies share with responses,
// open in openapi.yaml (responses stay open) but closed in a predicate, as
// the server reads them (it refuses unknown fields in a request body).
var sharedObjects = map[string]bool{"RunEnvironment": true, "RuntimeInfo": true, "RunComparison": true, "UncomparedValue": true}

// closedInPredicate returns the component s, closed (additionalProperties
// false) when it is one of sharedObjects.
func closedInPredicate(name string, s any) any {
	m, ok := s.(map[string]any)
	if !ok || !sharedObjects[name] {
		return s
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out["additionalProperties"] = false
	return out
}

// predicateSchema builds a standalone JSON Schema (2020-12) for a signed
// record's predicate from openapi.yaml: the body's component with every
// component it references under $defs, and "envelope" forbidden (the
// predicate is the body without it); bound, the body is the "body" of an
// object that names the log origin and the agent id beside it.
func predicateSchema(doc map[string]any, component, file, predicateType string, bound bool) ([]byte, error) {
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	defs := map[string]any{}
	var collect func(v any) error
	collect = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				name, ok := strings.CutPrefix(ref, "#/components/schemas/")
				if !ok {
					return fmt.Errorf("reference %q outside components.schemas", ref)
				}
				x["$ref"] = "#/$defs/" + name
				if _, done := defs[name]; !done {
					s, ok := schemas[name]
					if !ok {
						return fmt.Errorf("no component %s", name)
					}
					s = closedInPredicate(name, s)
					defs[name] = s
					if err := collect(s); err != nil {
						return err
					}
				}
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := collect(x[k]); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := collect(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	body := schemas[component]
	if err := collect(body); err != nil {
		return nil, err
	}
	withoutEnvelope := []any{map[string]any{"$ref": "#/$defs/" + component}, map[string]any{"not": map[string]any{"required": []any{"envelope"}}}}
	out := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         "https://dotlab.online/spec/" + file,
		"title":       "DotLab signed-record predicate " + predicateType,
		"description": "The predicate of an in-toto Statement v1 with predicateType " + predicateType + ": the " + component + " request body without \"envelope\". Generated from spec/openapi.yaml (go test ./spec -run TestPredicateSchemas -update).",
		"allOf":       withoutEnvelope,
		"$defs":       map[string]any{component: body},
	}
	if bound {
		delete(out, "allOf")
		out["description"] = "The predicate of an in-toto Statement v1 with predicateType " + predicateType + ": the " + component + " request body without \"envelope\" as \"body\", bound to the log it is posted to and the agent posting it (docs/verification.md §7). Generated from spec/openapi.yaml (go test ./spec -run TestPredicateSchemas -update)."
		out["type"], out["additionalProperties"], out["required"] = "object", false, []any{"log_origin", "agent_id", "body"}
		out["properties"] = map[string]any{
			"log_origin": map[string]any{"type": "string", "minLength": 1, "description": "The origin of the log the record is posted to: the first line of the server's checkpoints (GET /api/v1/status log.origin). A server refuses a statement naming another log's."},
			"agent_id":   map[string]any{"type": "string", "minLength": 1, "description": "The posting agent's id on that server (GET /api/v1/agents/me id). A server refuses a statement naming another agent's."},
			"body":       map[string]any{"allOf": withoutEnvelope},
		}
	}
	for k, v := range defs {
		out["$defs"].(map[string]any)[k] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TestPredicateSchemas: the published predicate schemas are generated from
// openapi.yaml's request bodies (-update rewrites them), and predicates as
// attest signs them validate against them, while a predicate carrying an
// envelope does not.
func TestPredicateSchemas(t *testing.T) {
	for _, src := range predicateSources {
		var doc map[string]any
		if err := yaml.Unmarshal(spec.OpenAPI, &doc); err != nil {
			t.Fatal(err)
		}
		want, err := predicateSchema(doc, src.component, src.file, src.predicateType, src.bound)
		if err != nil {
			t.Fatalf("%s: %v", src.file, err)
		}
		got := spec.Files()[src.file]
		if !bytes.Equal(got, want) {
			if !*update {
				t.Fatalf("spec/%s is out of date: run go test ./spec -run TestPredicateSchemas -update", src.file)
			}
			if err := os.WriteFile(src.file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote spec/%s", src.file)
		}
	}
	ctx := context.Background()
	k, err := attest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	run := sqlstoretest.RunBody("DL-0001", "1.58", "1.2299", dotlab.OutcomeNotReproduced)
	agrees := false
	ch := &dotlab.ChallengeBody{RunBody: *run, ClaimID: "DL-0001", Agrees: &agrees}
	ch.JobID = ""
	vote := &dotlab.VoteBody{Vote: dotlab.VoteRunner, Rationale: "sd_diff is the sample sd as printed", DisputeID: "DL-0001"}
	bind := attest.Binding{LogOrigin: "dotlab.example.org/log", AgentID: "ag_signer"}
	envs := []*dotlab.Envelope{must(attest.SignRun(ctx, k, run)), must(attest.SignChallenge(ctx, k, ch)), must(attest.SignVote(ctx, k, vote)),
		must(attest.SignBoundRun(ctx, k, bind, run)), must(attest.SignBoundChallenge(ctx, k, bind, ch)), must(attest.SignBoundVote(ctx, k, bind, vote))}
	for i, src := range predicateSources {
		sch := compilePredicateSchema(t, src.file)
		st, err := attest.Open(ctx, k.Public(), envs[i])
		if err != nil {
			t.Fatal(err)
		}
		if st.PredicateType != src.predicateType {
			t.Fatalf("%s: predicate type %s", src.file, st.PredicateType)
		}
		pred, _ := jsonschema.UnmarshalJSON(bytes.NewReader(st.Predicate))
		if err := sch.Validate(pred); err != nil {
			t.Errorf("%s: a signed predicate does not validate: %v", src.file, err)
		}
		for what, bad := range badPredicates(t, st.Predicate, src.bound) {
			if err := sch.Validate(bad); err == nil {
				t.Errorf("%s: a predicate %s validates", src.file, what)
			}
		}
	}
}

func compilePredicateSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Files()[file]))
	if err != nil {
		t.Fatal(err)
	}
	url := "https://dotlab.online/spec/" + file
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return sch
}

// badPredicates are predicate made invalid: with an envelope in its body,
// and, bound, without its log origin or with a made-up field beside it.
func badPredicates(t *testing.T, predicate []byte, bound bool) map[string]any {
	t.Helper()
	edit := func(change func(top, body map[string]any)) any {
		var top map[string]any
		dec := json.NewDecoder(bytes.NewReader(predicate))
		dec.UseNumber()
		if err := dec.Decode(&top); err != nil {
			t.Fatal(err)
		}
		body := top
		if bound {
			body = top["body"].(map[string]any)
		}
		change(top, body)
		data, _ := json.Marshal(top)
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		return v
	}
	out := map[string]any{"with an envelope": edit(func(_, body map[string]any) {
		body["envelope"] = map[string]any{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": []any{map[string]any{"keyid": "k", "sig": "c2ln"}}}
	})}
	if bound {
		out["without log_origin"] = edit(func(top, _ map[string]any) { delete(top, "log_origin") })
		out["with a made-up field beside the body"] = edit(func(top, _ map[string]any) { top["nonce"] = "x" })
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
