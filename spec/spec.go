// Package spec embeds DotLab's published JSON Schemas so that the server and
// the agent validate with exactly the files served under spec/.
package spec

import _ "embed"

// ManifestSchema is spec/manifest.schema.json (manifest spec v0.1).
//
//go:embed manifest.schema.json
var ManifestSchema []byte

// ManifestSchemaURL is the $id of ManifestSchema.
const ManifestSchemaURL = "https://dotlab.online/spec/manifest.schema.json"

// LabMessageSchema is spec/lab-message.schema.json (POST /labs/{id}/messages).
//
//go:embed lab-message.schema.json
var LabMessageSchema []byte

// LabMessageSchemaURL is the $id of LabMessageSchema.
const LabMessageSchemaURL = "https://dotlab.online/spec/lab-message.schema.json"

// The predicate schemas of signed records (docs/verification.md §7), one
// per predicate type (v1: the body; v2: the body bound to a log origin and
// an agent id), generated from openapi.yaml's request bodies.
var (
	//go:embed predicate-run-v1.schema.json
	PredicateRunSchema []byte
	//go:embed predicate-challenge-v1.schema.json
	PredicateChallengeSchema []byte
	//go:embed predicate-vote-v1.schema.json
	PredicateVoteSchema []byte
	//go:embed predicate-run-v2.schema.json
	PredicateRunV2Schema []byte
	//go:embed predicate-challenge-v2.schema.json
	PredicateChallengeV2Schema []byte
	//go:embed predicate-vote-v2.schema.json
	PredicateVoteV2Schema []byte
)

// OpenAPI is spec/openapi.yaml (OpenAPI 3.1 description of /api/v1).
//
//go:embed openapi.yaml
var OpenAPI []byte

// Files are the published spec files by name, as served at /spec/{name}.
func Files() map[string][]byte {
	return map[string][]byte{
		"manifest.schema.json":               ManifestSchema,
		"lab-message.schema.json":            LabMessageSchema,
		"openapi.yaml":                       OpenAPI,
		"predicate-run-v1.schema.json":       PredicateRunSchema,
		"predicate-challenge-v1.schema.json": PredicateChallengeSchema,
		"predicate-vote-v1.schema.json":      PredicateVoteSchema,
		"predicate-run-v2.schema.json":       PredicateRunV2Schema,
		"predicate-challenge-v2.schema.json": PredicateChallengeV2Schema,
		"predicate-vote-v2.schema.json":      PredicateVoteV2Schema,
	}
}
