package dotlab

import (
	"regexp"
	"sync"
)

// lazyRegexp returns a function that compiles expr with regexp.MustCompile
// on its first call and returns that *regexp.Regexp on every call (safe for
// concurrent use). The root package's patterns use it instead of a
// package-level regexp.MustCompile, which every dotlab command would pay
// for at start, before main, whether or not it matches anything
// (internal/lazyre is the same for the other packages; this package imports
// only the standard library). Its expressions are checked at test time
// (internal/lazyre's TestEveryExpressionInTheModuleCompiles).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
