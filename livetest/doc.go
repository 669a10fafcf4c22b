// Package livetest holds the live-events test of the scale-out work
// (docs/deploy.md, bench/README.md "Scale-out"): real `dotlab serve` processes on one PostgreSQL
// database, 1,000 SSE subscribers spread over them, messages posted to
// either, one server killed and restarted in the middle (docs/protocol.md
// §9, docs/deploy.md "Live events and the read cache"). It has no code outside its test.
package livetest
