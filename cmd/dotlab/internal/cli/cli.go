// Package cli is what the dotlab command shows on a terminal and how it
// reads the files it is given: rerun tables, lab room messages and events,
// the progress line, manifest files with their problems reported by JSON
// path, server errors, and the exit status an error carries. cmd/dotlab
// wires its commands to these; nothing here talks to a server.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab"
)

// ExitError carries a specific process exit status (1 for an invalid
// manifest); other errors exit with 2.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit status for err: an ExitError's code, else 2.
func ExitCode(err error) int {
	if e := (*ExitError)(nil); errors.As(err, &e) {
		return e.Code
	}
	return 2
}

// APIErr renders a server error (docs/protocol.md §5) as "server says code:
// detail; detail"; other errors pass unchanged.
func APIErr(err error) error {
	var de *dotlab.Error
	if errors.As(err, &de) {
		return fmt.Errorf("server says %s: %s", de.Code, strings.Join(de.Detail, "; "))
	}
	return err
}

// PrintJSON writes v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// DefaultCacheDir is where images and downloads are kept unless --cache
// says otherwise: $XDG_CACHE_HOME/dotlab or ~/.cache/dotlab.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dotlab")
	}
	return filepath.Join(os.TempDir(), "dotlab-cache")
}

// Plural is "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// AtLeast refuses flag's value n below min, naming the flag and the bound.
func AtLeast(flag string, n, min int) error {
	if n < min {
		return fmt.Errorf("%s %d: give at least %d", flag, n, min)
	}
	return nil
}
