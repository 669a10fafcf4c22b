package manifest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

func valid(t testing.TB) string {
	b, err := os.ReadFile("testdata/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseValid(t *testing.T) {
	m, err := manifest.Parse([]byte(valid(t)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Targets[0].Value != "4.062" || *m.Seed != 1908 || m.Datasets[0].DataPath() != "sleep.csv" || m.Environment.ImageDigest() != "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Fatalf("parsed %+v", m)
	}
}

// Each case edits the valid manifest and names the JSON path that must be
// reported.
func TestParseProblemsByPath(t *testing.T) {
	cases := []struct {
		name, old, new, path string
	}{
		{"tag without digest", `python@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`, `python:3.11`, "$.environment.image"},
		{"short sha256", `"sha256": "ce42`, `"sha256": "ce4`, "$.datasets[0].sha256"},
		{"unknown field (typo)", `"seed": 1908`, `"sede": 1908`, "$"},
		{"case-variant key", `"seed": 1908`, `"seed": 1908, "Seed": 1`, "$.Seed"},
		{"duplicate key", `"seed": 1908`, `"seed": 1908, "seed": 1`, "$.seed"},
		{"dependency range", `"3.11.2"`, `">=3.11"`, `$.environment.dependencies["python3"]`},
		{"dependency wildcard", `"3.11.2"`, `"3.x"`, `$.environment.dependencies["python3"]`},
		{"path escapes data dir", `"path": "sleep.csv"`, `"path": "../etc/passwd"`, "$.datasets[0].path"},
		{"relative tolerance on zero", `"value": 1.58`, `"value": 0`, "$.targets[1].tolerance"},
		{"negative tolerance", `"value": 0.0005`, `"value": -0.0005`, "$.targets[0].tolerance.value"},
		{"duplicate target", `"name": "mean_diff"`, `"name": "t_paired"`, "$.targets[1].name"},
		{"bad target name", `"name": "mean_diff"`, `"name": "mean diff"`, "$.targets[1].name"},
		{"short commit", `"commit": "0123456789abcdef0123456789abcdef01234567"`, `"commit": "0123456"`, "$.code.commit"},
		{"relative working dir", `"/work/code"`, `"work/code"`, "$.working_dir"},
		{"empty entrypoint", `["python3", "analysis.py"]`, `[]`, "$.entrypoint"},
		{"seed not integer", `"seed": 1908`, `"seed": 1908.5`, "$.seed"},
		{"target value a string", `"value": 4.062`, `"value": "4.062"`, "$.targets[0].value"},
		{"wrong spec version", `"spec_version": "0.1"`, `"spec_version": "0.3"`, "$.spec_version"},
		{"v0.2 field in a v0.1 manifest", `"code": {`, `"downloads": [{"name": "x", "url": "https://example.org/x", "sha256": "` + strings.Repeat("a", 64) + `"}], "code": {`, "$.downloads"},
		{"timeout zero", `"timeout_seconds": 600`, `"timeout_seconds": 0`, "$.limits.timeout_seconds"},
		{"huge exponent", `"value": 4.062`, `"value": 4e999999`, "$.targets[0].value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := strings.Replace(valid(t), c.old, c.new, 1)
			if in == valid(t) {
				t.Fatalf("edit %q did not apply", c.old)
			}
			_, err := manifest.Parse([]byte(in))
			if dotlab.ErrorCode(err) != dotlab.EINVALID {
				t.Fatalf("err = %v, want invalid", err)
			}
			found := false
			for _, d := range dotlab.ErrorDetail(err) {
				if strings.HasPrefix(d, c.path+":") {
					found = true
				}
			}
			if !found {
				t.Fatalf("no problem at %s in %q", c.path, dotlab.ErrorDetail(err))
			}
		})
	}
}

func TestParseListsEveryProblem(t *testing.T) {
	in := strings.NewReplacer(`"commit": "0123456789abcdef0123456789abcdef01234567"`, `"commit": "xyz"`,
		`"value": 0.0005`, `"value": -1`).Replace(valid(t))
	_, err := manifest.Parse([]byte(in))
	if d := dotlab.ErrorDetail(err); len(d) < 2 {
		t.Fatalf("want both problems listed, got %q", d)
	}
}

func TestHashIsCanonical(t *testing.T) {
	a := []byte(`{"b": 1.50, "a": [1, 2], "c": "x"}`)
	b := []byte(`{"a":[1,2],"c":"x","b":1.5}`)
	ha, err := manifest.Hash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := manifest.Hash(b)
	if ha != hb || len(ha) != 64 {
		t.Fatalf("hashes differ: %s %s", ha, hb)
	}
	hc, _ := manifest.Hash([]byte(`{"a":[2,1],"c":"x","b":1.5}`))
	if hc == ha {
		t.Fatal("array order must matter")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid(f)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"spec_version":"0.1","targets":[{"name":"a","value":1e400,"tolerance":{"type":"relative","value":0}}]}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Add([]byte("{\"title\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manifest.Parse(data)
		if err == nil {
			// Whatever passes must pass the semantic checks again and hash.
			if err := manifest.Check(m); err != nil {
				t.Fatalf("Parse accepted a manifest Check rejects: %v", err)
			}
			if _, err := manifest.Hash(data); err != nil {
				t.Fatalf("valid manifest does not hash: %v", err)
			}
		} else if dotlab.ErrorCode(err) != dotlab.EINVALID {
			t.Fatalf("error code %q, want invalid: %v", dotlab.ErrorCode(err), err)
		}
	})
}

func TestIdentityNumbersMustBeExact(t *testing.T) {
	for _, c := range []struct{ old, new, path string }{
		{`"value": 4.062`, `"value": 9007199254740993`, "$.targets[0].value"},
		{`"value": 4.062`, `"value": 0.10000000000000000001`, "$.targets[0].value"},
		{`"cpus": 1`, `"cpus": 1e-400`, "$.limits.cpus"},
		{`"value": 4.062`, `"value": 1e400`, "$.targets[0].value"},
	} {
		_, err := manifest.Parse([]byte(strings.Replace(valid(t), c.old, c.new, 1)))
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.HasPrefix(dotlab.ErrorDetail(err)[0], c.path+":") {
			t.Errorf("%s: err = %v", c.new, err)
		}
	}
	// Spellings of the same double are fine and share an identity.
	if _, err := manifest.Parse([]byte(strings.Replace(valid(t), `"value": 4.062`, `"value": 4.0620`, 1))); err != nil {
		t.Fatal(err)
	}
}

// TestSpecVersionRuntimeFields: the v0.2 fields parse under spec_version
// "0.2", and each is refused under "0.1" at its own path, with the fix.
func TestSpecVersionRuntimeFields(t *testing.T) {
	hash := strings.Repeat("b", 64)
	fields := []struct{ path, old, new string }{
		{"$.downloads", `"code": {`, `"downloads": [{"name": "helpers.R", "url": "https://example.org/helpers.R", "sha256": "` + hash + `"}], "code": {`},
		{"$.code.patches", `"commit": "0123456789abcdef0123456789abcdef01234567"`, `"commit": "0123456789abcdef0123456789abcdef01234567", "patches": [{"reason": "no folder picker", "diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}]`},
		{"$.environment.env", `"environment": {`, `"environment": {"env": {"TZ": "UTC"},`},
	}
	for _, f := range fields {
		in := strings.Replace(valid(t), f.old, f.new, 1)
		if in == valid(t) {
			t.Fatalf("%s: edit did not apply", f.path)
		}
		_, err := manifest.Parse([]byte(in))
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(strings.Join(dotlab.ErrorDetail(err), "\n"), f.path) {
			t.Errorf("%s under v0.1: err = %v, want invalid at %s", f.path, dotlab.ErrorDetail(err), f.path)
		}
		v2 := strings.Replace(in, `"spec_version": "0.1"`, `"spec_version": "0.2"`, 1)
		m, err := manifest.Parse([]byte(v2))
		if err != nil {
			t.Fatalf("%s under v0.2: %v", f.path, err)
		}
		if m.SpecVersion != dotlab.SpecVersionRuntime {
			t.Fatalf("spec_version = %q", m.SpecVersion)
		}
	}
}
