package manifest

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/lazyre"
)

// envVar is one variable a manifest may set in environment.env: the form
// its value must have, said as a rule for the error message; fits, when
// set, is a further check of a value the pattern admitted (a bound).
type envVar struct {
	value func() *regexp.Regexp // lazyre.New
	rule  string
	fits  func(string) bool
}

// hashSeed is Python's PYTHONHASHSEED bound: "random" or 0..4294967295
// (Python refuses larger values at start).
func hashSeed(v string) bool {
	if v == "random" {
		return true
	}
	_, err := strconv.ParseUint(v, 10, 32)
	return err == nil
}

// envName is the form of a variable name environment.env takes; any other
// name is refused up front and printed quoted (it may hold control
// characters).
var envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

var (
	threads  = envVar{lazyre.New(`^([1-9][0-9]{0,2}|1000)$`), "a thread count from 1 to 1000", nil}
	yesNo    = envVar{lazyre.New(`^(yes|no|TRUE|FALSE|true|false)$`), "yes or no (TRUE/FALSE)", nil}
	oneOrOff = envVar{lazyre.New(`^[01]$`), "0 or 1", nil}
)

// envAllowed is the allow-list of environment.env (docs/manifest-spec.md
// "environment"): variables that configure how a package runs (time zone,
// thread counts, plotting backend, hash seed, which of the image's R
// packages are attached) and that can neither load code from outside the
// image and the code tree nor change how numbers are printed or parsed.
var envAllowed = map[string]envVar{
	"TZ":                      tzName,
	"OMP_NUM_THREADS":         threads,
	"OPENBLAS_NUM_THREADS":    threads,
	"MKL_NUM_THREADS":         threads,
	"VECLIB_MAXIMUM_THREADS":  threads,
	"NUMEXPR_NUM_THREADS":     threads,
	"GOTO_NUM_THREADS":        threads,
	"OMP_DYNAMIC":             {lazyre.New(`^(TRUE|FALSE|true|false)$`), "TRUE or FALSE", nil},
	"MKL_CBWR":                {lazyre.New(`^(AUTO|COMPATIBLE|SSE2|SSE4_2|AVX|AVX2|AVX512)(,STRICT)?$`), "an MKL conditional-numerical-reproducibility branch such as COMPATIBLE", nil},
	"MPLBACKEND":              {lazyre.New(`^(Agg|agg|pdf|ps|svg|cairo|template)$`), "a non-interactive matplotlib backend: Agg, pdf, ps, svg, cairo or template (module:// backends load code)", nil},
	"PYTHONHASHSEED":          {lazyre.New(`^(random|0|[1-9][0-9]{0,9})$`), "random or an integer from 0 to 4294967295", hashSeed},
	"PYTHONDONTWRITEBYTECODE": oneOrOff,
	"PYTHONUNBUFFERED":        oneOrOff,
	"R_DEFAULT_PACKAGES":      {lazyre.New(`^(NULL|[A-Za-z][A-Za-z0-9.]*(,[A-Za-z][A-Za-z0-9.]*)*)$`), "NULL or a comma-separated list of R package names installed in the image", nil},
	"R_KEEP_PKG_SOURCE":       yesNo,
}

// envRefusedPrefixes say why families of variables are refused; a name
// neither allowed nor matched here is refused as not on the allow-list.
var envRefusedPrefixes = []struct{ prefix, why string }{
	{"LD_", "makes the dynamic linker load or find code"},
	{"DOTLAB_", "is set by DotLab itself"},
	{"LC_", "changes how numbers and text are printed and parsed (locale)"},
	{"R_PROFILE", "makes R run a startup file"},
	{"R_ENVIRON", "makes R read a startup file"},
	{"R_LIBS", "makes R load packages from elsewhere than the image"},
	{"PYTHONPATH", "makes Python import code from elsewhere"},
	{"PYTHONSTARTUP", "makes Python run a startup file"},
	{"PYTHONHOME", "makes Python load its library from elsewhere"},
	{"PYTHONUSERBASE", "makes Python import code from elsewhere"},
	{"PERL5", "makes Perl load code from elsewhere"},
	{"JAVA_TOOL_OPTIONS", "makes the JVM load agents"},
	{"JULIA_", "changes where Julia loads code from"},
	{"NODE_", "changes where Node loads code from"},
	{"GCONV_PATH", "makes glibc load code"},
	{"MALLOC_", "changes the allocator the runtime uses"},
	{"GLIBC_TUNABLES", "changes glibc's behaviour (and has been an attack vector)"},
}

var envRefusedNames = map[string]string{
	"LANG":          "changes how numbers and text are printed and parsed (locale); DotLab sets LANG=C.UTF-8",
	"LANGUAGE":      "changes the language of messages a target source may read",
	"PATH":          "decides which programs run; it comes from the image",
	"HOME":          "is set by DotLab (HOME=/tmp)",
	"TMPDIR":        "is set by DotLab (TMPDIR=/tmp)",
	"BASH_ENV":      "makes bash run a startup file",
	"ENV":           "makes sh run a startup file",
	"SHELLOPTS":     "changes how shell scripts run",
	"IFS":           "changes how shell scripts split words",
	"R_HOME":        "makes R load itself from elsewhere",
	"OUTDEC":        "changes R's decimal mark",
	"SSL_CERT_FILE": "decides which TLS roots are trusted; set by the runner when the manifest has downloads",
}

// checkEnv holds environment.env to the allow-list (names, then each
// value's form), naming the variable and why it is refused.
func checkEnv(p *dotlab.Problems, env map[string]string) {
	for _, name := range sortedNames(env) {
		if !envName().MatchString(name) {
			p.Add("$.environment.env["+strconv.Quote(name)+"]", "refused: %q is not a variable name (letters, digits and _, not starting with a digit); environment.env takes only %s", name, strings.Join(sortedNames(envAllowed), ", "))
			continue
		}
		at := "$.environment.env." + name
		v, ok := envAllowed[name]
		if !ok {
			p.Add(at, "refused: %s; environment.env takes only %s", envRefusal(name), strings.Join(sortedNames(envAllowed), ", "))
			continue
		}
		if !v.value().MatchString(env[name]) || (v.fits != nil && !v.fits(env[name])) {
			p.Add(at, "%q is not %s", env[name], v.rule)
		}
	}
}

// envRefusal says why a variable not on the allow-list is refused.
func envRefusal(name string) string {
	if why, ok := envRefusedNames[name]; ok {
		return name + " " + why
	}
	upper := strings.ToUpper(name)
	for _, r := range envRefusedPrefixes {
		if strings.HasPrefix(upper, r.prefix) {
			return name + " " + r.why
		}
	}
	if strings.HasSuffix(strings.ToLower(name), "_proxy") {
		return name + " routes the network, which the sandbox does not have (downloads are answered by the runner)"
	}
	return name + " is not on the allow-list of variables a package is configured by"
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// EnvAllowed lists the variables environment.env may set, sorted.
func EnvAllowed() []string { return sortedNames(envAllowed) }
