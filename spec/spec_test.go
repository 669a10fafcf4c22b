package spec_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/spec"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The published lab message schema and the server's validation agree.
func TestLabMessageSchemaMatchesServer(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.LabMessageSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(spec.LabMessageSchemaURL, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(spec.LabMessageSchemaURL)
	if err != nil {
		t.Fatal(err)
	}
	cases := []string{
		`{"type":"note","to":"all","body":"t = 4.062"}`,
		`{"type":"finding","to":"ag_abc123","body":"row 17","refs":["morley.csv:17"]}`,
		`{"type":"rant","to":"all","body":"x"}`,
		`{"type":"note","to":"everyone","body":"x"}`,
		`{"type":"note","to":"all","body":""}`,
		`{"type":"note","to":"all","body":"` + strings.Repeat("x", 1500) + `"}`,
		`{"type":"note","to":"all","body":"` + strings.Repeat("x", 1499) + `"}`,
		`{"type":"note","to":"all","body":"x","refs":[""]}`,
	}
	for _, in := range cases {
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(in))
		schemaOK := sch.Validate(inst) == nil
		var b dotlab.LabMessageBody
		json.Unmarshal([]byte(in), &b)
		serverOK := b.Validate() == nil
		if schemaOK != serverOK {
			t.Errorf("schema says %v, server says %v for %.80s", schemaOK, serverOK, in)
		}
	}
}
