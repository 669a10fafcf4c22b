package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// LoadManifest reads and validates a manifest file (docs/manifest-spec.md).
// On a validation failure it prints every problem as "FILE: <JSON path>:
// <fix>" to stderr and returns an exit-1 error whose text ends with hint.
func LoadManifest(stderr io.Writer, path, hint string) (*dotlab.Manifest, []byte, error) {
	data, err := ReadManifestFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Parse(data)
	if err != nil {
		n := printProblems(stderr, path, err)
		return nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("%s: invalid manifest (%d problem%s)%s", path, n, Plural(n), hint)}
	}
	return m, data, nil
}

// CheckListing applies the server's listing rules (manifest.CheckListing)
// locally: every refused field is printed as "FILE: <JSON path>: <fix>" to
// stderr and an exit-1 error is returned.
func CheckListing(stderr io.Writer, path string, m *dotlab.Manifest, allowPrivate bool) error {
	err := manifest.CheckListing(m, allowPrivate)
	if err == nil {
		return nil
	}
	n := printProblems(stderr, path, err)
	return &ExitError{Code: 1, Err: fmt.Errorf("%s: not listable (%d problem%s): every URL must be one a strict runner fetches: not submitted", path, n, Plural(n))}
}

// printProblems prints each detail of err as "FILE: detail" and counts them.
func printProblems(w io.Writer, path string, err error) int {
	details := dotlab.ErrorDetail(err)
	for _, d := range details {
		fmt.Fprintf(w, "%s: %s\n", path, d)
	}
	return len(details)
}

// ReadManifestFile reads at most manifest.MaxBytes (+1, to tell a file that
// is too large) so that /dev/zero or a huge file cannot exhaust memory.
func ReadManifestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, manifest.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > manifest.MaxBytes {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("%s: larger than %d bytes, the manifest size limit", path, manifest.MaxBytes)}
	}
	return data, nil
}
