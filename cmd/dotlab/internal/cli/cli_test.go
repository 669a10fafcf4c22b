package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
)

func TestExitCodeAndAPIErr(t *testing.T) {
	wrapped := fmt.Errorf("context: %w", &ExitError{Code: 1, Err: errors.New("invalid")})
	if ExitCode(wrapped) != 1 || ExitCode(errors.New("other")) != 2 {
		t.Fatalf("exit codes %d %d, want 1 and 2", ExitCode(wrapped), ExitCode(errors.New("other")))
	}
	err := APIErr(fmt.Errorf("call: %w", &dotlab.Error{Code: dotlab.ECONFLICT, Detail: []string{"a", "b"}}))
	if err.Error() != "server says conflict: a; b" {
		t.Fatalf("APIErr: %q", err)
	}
}

func TestReadManifestFileBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(p, make([]byte, manifest.MaxBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifestFile(p); ExitCode(err) != 1 || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("too large: %v", err)
	}
	var stderr strings.Builder
	if _, _, err := LoadManifest(&stderr, "../../../../manifest/testdata/valid.json", ""); err != nil {
		t.Fatalf("valid manifest: %v %s", err, stderr.String())
	}
}

func TestPrintRecord(t *testing.T) {
	rec := &runner.Record{Body: dotlab.RunBody{Outcome: dotlab.OutcomeNotReproduced, Notes: "one value off"},
		Comparisons: []dotlab.Comparison{{Name: "t", Published: "4.06", Rerun: "5", Difference: "0.94", ToleranceType: dotlab.ToleranceRelative, Tolerance: "0.01", Allowed: "0.0406"}},
		ReadFrom:    map[string]string{"t": "stdout, regex \"t = (\\S+)\""},
		Refused:     []string{"GET http://data.example.org/f.csv?v=2 (not pinned)", "CONNECT example.org:443 (no URL on this host is pinned)"}}
	rec.Body.Environment = dotlab.RunEnvironment{ImageDigest: "sha256:" + strings.Repeat("a", 64), CodeCommit: strings.Repeat("b", 40),
		Runtime: &dotlab.RuntimeInfo{Name: "runc", Version: "1.1.5+ds1"}}
	var out strings.Builder
	PrintRecord(&out, rec, "o")
	for _, want := range []string{"relative 0.01 (±0.0406)", "NO", "outcome: not_reproduced", "notes: one value off", "record: o/run.json",
		"image: sha256:aaaa", `stdout, regex "t = (\S+)"`, "code: commit bbbb", "runtime: runc 1.1.5+ds1",
		"refused by the sandbox", "  GET http://data.example.org/f.csv?v=2 (not pinned)\n  CONNECT example.org:443 (no URL on this host is pinned)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}
}
