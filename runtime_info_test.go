package dotlab

import (
	"strings"
	"testing"
)

// TestRuntimeInfoBounds: environment.runtime fields within bounds pass;
// each out-of-bounds field is named by its JSON path.
func TestRuntimeInfoBounds(t *testing.T) {
	ok := RuntimeInfo{Name: "runc", Version: "1.1.5+ds1", Commit: "1.1.5+ds1-1+deb12u1", Spec: "1.0.2-dev",
		Package: "runc", PackageVersion: "1.1.5+ds1-1+deb12u1", Fixes: []string{"CVE-2024-21626"}}
	var p Problems
	ok.check(&p)
	(*RuntimeInfo)(nil).check(&p)
	if len(p) > 0 {
		t.Fatalf("valid runtime refused: %v", p)
	}
	many := make([]string, MaxRuntimeFixes+1)
	for i := range many {
		many[i] = "CVE-2025-31133"
	}
	for want, mutate := range map[string]func(*RuntimeInfo){
		"$.environment.runtime.name":            func(r *RuntimeInfo) { r.Name = "Run C" },
		"$.environment.runtime.version":         func(r *RuntimeInfo) { r.Version = "" },
		"$.environment.runtime.commit":          func(r *RuntimeInfo) { r.Commit = strings.Repeat("a", MaxRuntimeField+1) },
		"$.environment.runtime.spec":            func(r *RuntimeInfo) { r.Spec = "1.0\u200b" },
		"$.environment.runtime.package_version": func(r *RuntimeInfo) { r.PackageVersion = "1 2" },
		"$.environment.runtime.fixes[0]":        func(r *RuntimeInfo) { r.Fixes = []string{"cve-2024-21626"} },
		"$.environment.runtime.fixes[1]":        func(r *RuntimeInfo) { r.Fixes = []string{"CVE-2024-21626", "CVE-2024-21626"} },
		"$.environment.runtime.fixes":           func(r *RuntimeInfo) { r.Fixes = many },
	} {
		r := ok
		mutate(&r)
		var p Problems
		r.check(&p)
		if len(p) == 0 || !strings.HasPrefix(p[0], want+":") {
			t.Errorf("%s: problems %v", want, p)
		}
	}
}
