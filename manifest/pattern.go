package manifest

import (
	"regexp"
	"regexp/syntax"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// patternEngine is the schema compiler's regular-expression engine
// (jsonschema.Compiler.UseRegexpEngine) for one NewValidator call. The
// compiler asks for each "pattern" twice (once checking the schema against
// its metaschema's "format": "regex", once compiling it), and the default
// engine runs regexp.Compile both times, for every pattern of the schema,
// whether or not any manifest reaches it: 42 compilations, a fifth of
// NewValidator's time. This engine checks each pattern's syntax at once
// (regexp/syntax.Parse with the flags regexp.Compile uses, which is where
// all of regexp.Compile's errors come from, so a bad pattern still fails
// NewValidator), hands the same matcher to both requests, and compiles it
// with regexp.Compile on its first MatchString. Matching is exactly
// regexp's. Not safe for concurrent compiles (a Compiler is not either);
// the matchers it returns are safe for concurrent use.
type patternEngine map[string]*lazyPattern

// compile is the jsonschema.RegexpEngine.
func (e patternEngine) compile(expr string) (jsonschema.Regexp, error) {
	if p, ok := e[expr]; ok {
		return p, nil
	}
	if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
		return nil, err
	}
	p := &lazyPattern{expr: expr, re: sync.OnceValue(func() *regexp.Regexp {
		// Cannot fail: the syntax was checked above.
		return regexp.MustCompile(expr)
	})}
	e[expr] = p
	return p, nil
}

// lazyPattern is a jsonschema.Regexp compiled on first use.
type lazyPattern struct {
	expr string
	re   func() *regexp.Regexp
}

func (p *lazyPattern) String() string { return p.expr }

// MatchString reports whether s contains a match of the pattern.
func (p *lazyPattern) MatchString(s string) bool { return p.re().MatchString(s) }
