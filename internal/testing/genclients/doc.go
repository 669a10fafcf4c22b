// Package genclients holds only tests: clients generated from the published
// spec/openapi.yaml by third-party generators (ogen for Go, openapi-typescript
// with openapi-fetch for TypeScript), each driven through a claim's
// lifecycle against a live server. The generated code is written to a
// temporary directory on every run, never committed (ogen's is some 50,000
// lines); the drivers are under testdata/. spec/README.md lists what each
// generator does with a decimal.
package genclients
