// Package lazyre holds regular expressions that are compiled on first use
// rather than at package initialisation. Every dotlab command runs every
// package's initialisation before main, so a package-level
// regexp.MustCompile costs each `dotlab rerun` its compilation (and the
// garbage it leaves) even when the command never matches against it.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr with regexp.MustCompile on its
// first call and returns the same *regexp.Regexp on every call; safe for
// concurrent use. An invalid expr panics at that first call (as
// regexp.MustCompile at initialisation would have, but later): expressions
// given here are constants, checked by the package's tests that use them.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
