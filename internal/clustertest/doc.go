// Package clustertest holds the multi-process tests of docs/deploy.md:
// real `dotlab serve` processes on one database behind a real
// HAProxy (internal/cluster), driven by real `dotlab` agent processes and
// by HTTP clients, with servers killed by SIGKILL mid-stream. It has no
// code of its own; see race_test.go and crash_test.go.
package clustertest
