package manifest_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// v02 returns the valid manifest as spec v0.2 with code.patches and
// environment.env set as given (nil leaves a field out).
func v02(t *testing.T, patches []dotlab.Patch, env map[string]string) []byte {
	t.Helper()
	in := strings.Replace(valid(t), `"spec_version": "0.1"`, `"spec_version": "0.2"`, 1)
	if patches != nil {
		b, _ := json.Marshal(patches)
		in = strings.Replace(in, `"commit": "0123456789abcdef0123456789abcdef01234567"`, `"commit": "0123456789abcdef0123456789abcdef01234567", "patches": `+string(b), 1)
	}
	if env != nil {
		b, _ := json.Marshal(env)
		in = strings.Replace(in, `"environment": {`, `"environment": {"env": `+string(b)+`,`, 1)
	}
	return []byte(in)
}

const oneLine = "--- a/analysis.R\n+++ b/analysis.R\n@@ -8 +8 @@\n-setwd(choose.dir())\n+setwd(\"/work/code\")\n"

func problems(err error) string { return strings.Join(dotlab.ErrorDetail(err), "\n") }

func TestPatchesChecked(t *testing.T) {
	m, err := manifest.Parse(v02(t, []dotlab.Patch{{Reason: "choose.dir() is Windows-only and interactive", Diff: oneLine}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := manifest.SummarizePatches(m.Code.Patches); len(s) != 1 || s[0].Added != 1 || s[0].Removed != 1 || s[0].Files[0] != "analysis.R" {
		t.Fatalf("summary %+v", s)
	}
	cases := []struct {
		name    string
		patches []dotlab.Patch
		path    string
		has     string
	}{
		{"not a diff", []dotlab.Patch{{Reason: "r", Diff: oneLine}, {Reason: "r", Diff: "setwd('.')\n"}}, "$.code.patches[1].diff", "not part of a unified diff"},
		{"mode change", []dotlab.Patch{{Reason: "r", Diff: "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"}}, "$.code.patches[0].diff", "mode"},
		{"outside the tree", []dotlab.Patch{{Reason: "r", Diff: strings.ReplaceAll(oneLine, "analysis.R", "../../etc/profile")}}, "$.code.patches[0].diff", "inside the code tree"},
		{"over 64 KiB in all", []dotlab.Patch{{Reason: "r", Diff: big(40000)}, {Reason: "r", Diff: big(30000)}}, "$.code.patches[1]", "at most 65536 in all"},
	}
	for _, c := range cases {
		_, err := manifest.Parse(v02(t, c.patches, nil))
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(problems(err), c.path+": ") || !strings.Contains(problems(err), c.has) {
			t.Errorf("%s: got %q, want %s … %s", c.name, problems(err), c.path, c.has)
		}
	}
}

// big is a valid diff of about n bytes.
func big(n int) string {
	var b strings.Builder
	lines := n / 20
	b.WriteString("--- a/data.txt\n+++ b/data.txt\n@@ -1," + itoa(lines) + " +1," + itoa(lines) + " @@\n")
	for i := 0; i < lines; i++ {
		b.WriteString(" unchanged line 0001\n")
	}
	s := b.String()
	return strings.Replace(s, " unchanged line 0001\n", "-unchanged line 0001\n+changed   line 0001\n", 1)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestEnvAllowList(t *testing.T) {
	ok := map[string]string{"TZ": "Europe/Berlin", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg",
		"PYTHONHASHSEED": "0", "R_DEFAULT_PACKAGES": "datasets,utils,grDevices,graphics,stats,methods", "R_KEEP_PKG_SOURCE": "yes"}
	m, err := manifest.Parse(v02(t, nil, ok))
	if err != nil {
		t.Fatalf("allowed variables: %v", problems(err))
	}
	if m.Environment.Env["TZ"] != "Europe/Berlin" {
		t.Fatalf("env %v", m.Environment.Env)
	}
	refused := map[string]string{
		"LD_PRELOAD": "dynamic linker", "LD_LIBRARY_PATH": "dynamic linker", "PYTHONPATH": "import code", "PYTHONSTARTUP": "startup file",
		"R_PROFILE_USER": "startup file", "R_ENVIRON_USER": "startup file", "R_LIBS_USER": "load packages", "R_LIBS": "load packages",
		"LANG": "locale", "LC_NUMERIC": "locale", "LC_ALL": "locale", "http_proxy": "network", "HTTPS_PROXY": "network", "no_proxy": "network",
		"DOTLAB_SEED": "set by DotLab", "PATH": "image", "HOME": "set by DotLab", "FOO": "not on the allow-list",
	}
	for name, why := range refused {
		_, err := manifest.Parse(v02(t, nil, map[string]string{name: "x"}))
		want := "$.environment.env." + name + ": refused: " + name
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(problems(err), want) || !strings.Contains(problems(err), why) {
			t.Errorf("%s: got %q, want %q … %q", name, problems(err), want, why)
		}
	}
	badValues := map[string]string{"OMP_NUM_THREADS": "0", "MPLBACKEND": "module://evil", "TZ": "../../etc/passwd", "PYTHONHASHSEED": "-1",
		"R_DEFAULT_PACKAGES": "stats;system('id')"}
	for name, v := range badValues {
		_, err := manifest.Parse(v02(t, nil, map[string]string{name: v}))
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(problems(err), "$.environment.env."+name+": ") {
			t.Errorf("%s=%s: got %q", name, v, problems(err))
		}
	}
}

// TestEnvHashSeedBoundAndQuotedNames: PYTHONHASHSEED takes what Python
// takes (random, 0..4294967295); a name that is not a variable name is
// refused with the name quoted, so no control character reaches a
// terminal.
func TestEnvHashSeedBoundAndQuotedNames(t *testing.T) {
	for _, v := range []string{"0", "4294967295", "random"} {
		if _, err := manifest.Parse(v02(t, nil, map[string]string{"PYTHONHASHSEED": v})); err != nil {
			t.Errorf("PYTHONHASHSEED=%s: %v", v, problems(err))
		}
	}
	for _, v := range []string{"4294967296", "9999999999", "01"} {
		_, err := manifest.Parse(v02(t, nil, map[string]string{"PYTHONHASHSEED": v}))
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(problems(err), "$.environment.env.PYTHONHASHSEED: ") {
			t.Errorf("PYTHONHASHSEED=%s: got %q", v, problems(err))
		}
	}
	// The schema refuses such names when a manifest is parsed; Check (which
	// a manifest built in Go meets without the schema) refuses them too.
	m, err := manifest.Parse(v02(t, nil, nil))
	if err != nil {
		t.Fatal(problems(err))
	}
	for _, name := range []string{"R_DEFAULT_PACKAGES\x00", "TZ\x1b[2J", "A=B", "TZ ", "1TZ", "TZé"} {
		m.Environment.Env = map[string]string{name: "x"}
		err := manifest.Check(m)
		msg := problems(err)
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(msg, `$.environment.env[`+strconv.Quote(name)+`]: refused: `+strconv.Quote(name)+" is not a variable name") {
			t.Errorf("%q: got %q", name, msg)
		}
		for _, r := range msg {
			if r < 0x20 || r == 0x7f {
				t.Errorf("%q: a control character in the message %q", name, msg)
				break
			}
		}
	}
}
