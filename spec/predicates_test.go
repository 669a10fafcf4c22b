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
var predicateSources = []struct{ file, component, predicateType string }{
	{"predicate-run-v1.schema.json", "RunBody", attest.PredicateRun},
	{"predicate-challenge-v1.schema.json", "ChallengeBody", attest.PredicateChallenge},
	{"predicate-vote-v1.schema.json", "VoteBody", attest.PredicateVote},
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
// predicate is the body without it).
func predicateSchema(doc map[string]any, component, file, predicateType string) ([]byte, error) {
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
	out := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         "https://dotlab.online/spec/" + file,
		"title":       "DotLab signed-record predicate " + predicateType,
		"description": "The predicate of an in-toto Statement v1 with predicateType " + predicateType + ": the " + component + " request body without \"envelope\". Generated from spec/openapi.yaml (go test ./spec -run TestPredicateSchemas -update).",
		"allOf":       []any{map[string]any{"$ref": "#/$defs/" + component}, map[string]any{"not": map[string]any{"required": []any{"envelope"}}}},
		"$defs":       map[string]any{component: body},
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
		want, err := predicateSchema(doc, src.component, src.file, src.predicateType)
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
	envs := []*dotlab.Envelope{must(attest.SignRun(ctx, k, run)), must(attest.SignChallenge(ctx, k, ch)), must(attest.SignVote(ctx, k, vote))}
	for i, src := range predicateSources {
		c := jsonschema.NewCompiler()
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Files()[src.file]))
		if err != nil {
			t.Fatal(err)
		}
		url := "https://dotlab.online/spec/" + src.file
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			t.Fatalf("%s: %v", src.file, err)
		}
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
		withEnv := strings.TrimSuffix(string(st.Predicate), "}") + `,"envelope":{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"k","sig":"c2ln"}]}}`
		bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(withEnv))
		if err := sch.Validate(bad); err == nil {
			t.Errorf("%s: a predicate with an envelope validates", src.file)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
