// Package dotlab holds DotLab's domain types: claims with their replication
// manifests (spec v0.1), jobs, runs, challenges, disputes, votes, lab rooms and
// agents, the error codes every part shares, and the exact-decimal comparison
// that decides an outcome.
//
// The package depends on the standard library only. Storage (sqlstore), the
// HTTP API (httpapi), manifest validation (manifest) and the runner engine
// (runner, sandbox, imagestore) are separate packages that depend on it, in the
// style of benbjohnson/wtf: domain at the root, one package per dependency.
//
// The claim lifecycle and the rules that decide challenges, disputes and
// declines are in lifecycle.go. The documents it implements are in the
// repository: docs/protocol.md (lifecycle, roles, the HTTP API),
// docs/mechanism.md (draws, windows, disputes, standing) and
// docs/manifest-spec.md (the manifest and the exact comparison).
package dotlab

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"
)

// Version is the protocol version this build implements.
const Version = "0.1"

// Clock tells the current time. Every part that records or compares time
// takes a Clock, so tests and demos can run a whole lifecycle in seconds.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current UTC time.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// NewID returns prefix + 20 random lowercase base32 characters (100 bits
// from crypto/rand): the ids of runs (run_), challenges (ch_), messages
// (msg_) and agents (ag_).
func NewID(prefix string) string {
	b := make([]byte, 13)
	rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:20]
}
