package genclients_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/sqlstore"
)

// The pinned generators: ogen from the Go module proxy (go run), the npm
// packages as .ci/run installs them into .ci/node.
const (
	ogenModule = "github.com/ogen-go/ogen"
	ogenPin    = "v1.24.0"
)

var npmPins = map[string]string{"openapi-typescript": "7.13.0", "openapi-fetch": "0.17.0", "typescript": "5.9.3"}

// specPath is spec/openapi.yaml, the document the clients are generated from.
func specPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "spec", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startServer starts a real server on a SQLite file and returns its API
// base URL.
func startServer(t *testing.T) string {
	t.Helper()
	return servertest.Start(t, server.Config{DB: sqlstoretest.URL(t, sqlstore.SQLite), Windows: dotlab.DefaultWindows,
		SettleEvery: time.Second, Version: "genclients-test", AllowPrivateURLs: true}) + "/api/v1"
}

// manifests are the lifecycle's two manifests: the claim with the ten-digit
// t_paired target, and the extreme one whose target is the largest double
// (a rerun of the most negative double differs by more than a double
// holds).
func manifests() (string, string) {
	plain := sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "generated clients lifecycle", Seed: "1908", Targets: `[
    {"name": "mean_diff", "value": 1.58, "tolerance": {"type": "absolute", "value": 0.005}},
    {"name": "t_paired", "value": 4.0621234567, "tolerance": {"type": "relative", "value": 1e-9}}
  ]`})
	extreme := sqlstoretest.StudentManifest(sqlstoretest.ManifestParts{Title: "generated clients extreme decimal", Seed: "1908", Targets: `[
    {"name": "mean_diff", "value": 1.58, "tolerance": {"type": "absolute", "value": 0.005}},
    {"name": "huge", "value": 1.7976931348623157e308, "tolerance": {"type": "absolute", "value": 1}}
  ]`})
	return plain, extreme
}

// run runs name args in dir with env added and returns its stdout; a
// failure fails the test, or skips it outside CI when skippable (the tool
// could not be fetched).
func run(t *testing.T, skippable bool, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.Join(append([]string{name}, args...), " ") + ": " + err.Error() + "\n" + stdout.String() + stderr.String()
		if skippable && os.Getenv("CI") != "true" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return stdout.String()
}

// copyFiles copies the regular files of src into dst.
func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOgenClientLifecycle generates a Go client from spec/openapi.yaml with
// the pinned ogen (client only) into a temporary module, builds
// testdata/ogen's driver against it, and runs the driver against a live
// server: agents registered, a claim listed, the job drawn and accepted,
// the lab room, a run published with a ten-digit rerun value, the live
// stream's first event, a disagreeing challenge, three votes settling the
// claim, and a run whose difference (3.5953862697246314e308) is beyond a
// double. Every decimal is ogen's decimal.Decimal (format: decimal) and is
// checked exactly. The generated client (some 50,000 lines) is not
// committed. Outside CI a machine that cannot fetch ogen skips.
func TestOgenClientLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a generated client (-short)")
	}
	dir := t.TempDir()
	copyFiles(t, filepath.Join("testdata", "ogen"), dir)
	mod := "module ogendriver\n\ngo 1.25.0\n\nrequire " + ogenModule + " " + ogenPin + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs(filepath.Join("testdata", "ogen.yml"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod"}
	run(t, true, dir, env, "go", "run", ogenModule+"/cmd/ogen@"+ogenPin, "-config", cfg, "-clean", "-target", filepath.Join(dir, "api"), "-package", "api", specPath(t))
	run(t, true, dir, env, "go", "mod", "tidy")
	run(t, false, dir, env, "go", "build", "-o", "driver", ".")
	m, extreme := manifests()
	if out := run(t, false, dir, nil, filepath.Join(dir, "driver"), startServer(t), m, extreme); strings.TrimSpace(out) != "ok" {
		t.Fatalf("the ogen driver printed %q", out)
	}
}

// npmTool returns .ci/node's bin/name (as .ci/run installs the pinned npm
// packages), after checking every pinned package's installed version;
// missing or another version skips, or fails under CI.
func npmTool(t *testing.T, name string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".ci", "node", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	if _, err := exec.LookPath("node"); err != nil {
		problems = append(problems, "node: "+err.Error())
	}
	for pkg, pin := range npmPins {
		b, err := os.ReadFile(filepath.Join(root, pkg, "package.json"))
		var meta struct{ Version string }
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		if err != nil || meta.Version != pin {
			problems = append(problems, fmt.Sprintf("%s@%s (have %q, %v)", pkg, pin, meta.Version, err))
		}
	}
	if len(problems) > 0 {
		msg := "needs in .ci/node (.ci/run: npm install --prefix .ci/node): " + strings.Join(problems, "; ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return filepath.Join(root, ".bin", name)
}

// TestTypeScriptClientLifecycle generates TypeScript types from
// spec/openapi.yaml with the pinned openapi-typescript, type-checks
// testdata/ts's driver against them with tsc --strict (so a required field
// read as optional, or a field lost, fails the build), and runs it on Node
// with openapi-fetch against a live server: the same lifecycle as the ogen
// test. Decimals are numbers (doubles) in this client: exact for the
// values sent, and the limit (a difference beyond a double's range reads
// Infinity) is checked as spec/README.md documents it.
func TestTypeScriptClientLifecycle(t *testing.T) {
	gen, tsc := npmTool(t, "openapi-typescript"), npmTool(t, "tsc")
	dir := t.TempDir()
	copyFiles(t, filepath.Join("testdata", "ts"), dir)
	if err := os.Symlink(filepath.Dir(filepath.Dir(gen)), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	run(t, false, dir, nil, gen, specPath(t), "-o", filepath.Join(dir, "schema.d.ts"))
	run(t, false, dir, nil, tsc, "-p", dir)
	m, extreme := manifests()
	if out := run(t, false, dir, nil, "node", filepath.Join(dir, "out", "lifecycle.js"), startServer(t), m, extreme); strings.TrimSpace(out) != "ok" {
		t.Fatalf("the TypeScript driver printed %q", out)
	}
}

// TestCIInstallsThePins: .ci/run installs the npm packages at the versions
// npmPins holds, so CI runs what this package checks.
func TestCIInstallsThePins(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	for pkg, pin := range npmPins {
		if !strings.Contains(string(b), pkg+"@"+pin) {
			t.Errorf(".ci/run does not install %s@%s", pkg, pin)
		}
	}
}
