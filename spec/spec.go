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
