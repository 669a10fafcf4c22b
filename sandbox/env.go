package sandbox

import "sort"

// packageEnv is the manifest's environment.env as NAME=VALUE entries in
// name order, leaving out PATH and every variable in override (DotLab's
// own: HOME, TMPDIR, LANG, DOTLAB_*): manifest.Check refuses those names
// already, and the sandbox does not rely on it.
func packageEnv(set map[string]string, override map[string]string) []string {
	names := make([]string, 0, len(set))
	for k := range set {
		if _, ours := override[k]; !ours && k != "PATH" && k != "" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	env := make([]string, 0, len(names))
	for _, k := range names {
		env = append(env, k+"="+set[k])
	}
	return env
}
