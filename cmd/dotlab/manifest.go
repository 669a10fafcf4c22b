package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
	"github.com/spf13/cobra"
)

func newManifestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifest",
		Short: "Validate a replication manifest or print its canonical identity",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Validate FILE against manifest spec v0.1 (exit 0 valid, 1 invalid)",
		Long: `Validate FILE against manifest spec v0.1: strict JSON, the JSON Schema
spec/manifest.schema.json and the semantic rules of docs/manifest-spec.md.
Every problem is printed on its own line as FILE: <JSON path>: <what to fix>.
A valid manifest naming what a public server refuses at listing (file://,
local paths, plain http, private addresses, credentials in URLs) is valid for
a local rerun: each such field is printed as a warning
(FILE: warning: not listable: <JSON path>: <why>) and the exit status stays 0;
dotlab claim submit refuses it.
Exit status: 0 valid, 1 invalid, 2 the file could not be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, _, err := loadManifest(cmd, args[0], "")
			if err != nil {
				return err
			}
			// A valid manifest may still name what no server lists (a local
			// file for one's own rerun): say so, without failing.
			for _, d := range dotlab.ErrorDetail(manifest.CheckListing(m, false)) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: not listable: %s\n", args[0], d)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid manifest spec v%s: %q, %d dataset%s, %d target%s\n", args[0], m.SpecVersion, m.Title,
				len(m.Datasets), plural(len(m.Datasets)), len(m.Targets), plural(len(m.Targets)))
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "hash FILE",
		Short: "Print the manifest's canonical identity (SHA-256 of its RFC 8785 form)",
		Long: `Print the SHA-256 of FILE's RFC 8785 (JSON Canonicalization Scheme) form:
the identity under which a manifest can be listed only once. Whitespace, key
order and number spelling (1.50 vs 1.5) do not change it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readManifestFile(args[0])
			if err != nil {
				return err
			}
			h, err := manifest.Hash(data)
			if err != nil {
				var de *dotlab.Error
				if errors.As(err, &de) {
					return &exitError{code: 1, err: fmt.Errorf("%s: %s", args[0], de.Detail[0])}
				}
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h)
			return nil
		},
	})
	return cmd
}

// loadManifest reads and validates a manifest file. On a validation failure
// it prints every problem as "FILE: <JSON path>: <fix>" to stderr and returns
// an exit-1 error whose text ends with hint.
func loadManifest(cmd *cobra.Command, path, hint string) (*dotlab.Manifest, []byte, error) {
	data, err := readManifestFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Parse(data)
	if err != nil {
		for _, d := range dotlab.ErrorDetail(err) {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", path, d)
		}
		n := len(dotlab.ErrorDetail(err))
		return nil, nil, &exitError{code: 1, err: fmt.Errorf("%s: invalid manifest (%d problem%s)%s", path, n, plural(n), hint)}
	}
	return m, data, nil
}

// checkListing applies the server's listing rules (manifest.CheckListing)
// locally: every refused field is printed as "FILE: <JSON path>: <fix>" to
// stderr and an exit-1 error is returned.
func checkListing(cmd *cobra.Command, path string, m *dotlab.Manifest, allowPrivate bool) error {
	err := manifest.CheckListing(m, allowPrivate)
	if err == nil {
		return nil
	}
	for _, d := range dotlab.ErrorDetail(err) {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", path, d)
	}
	n := len(dotlab.ErrorDetail(err))
	return &exitError{code: 1, err: fmt.Errorf("%s: not listable (%d problem%s): every URL must be one a strict runner fetches: not submitted", path, n, plural(n))}
}

// readManifestFile reads at most manifest.MaxBytes (+1, to tell a file that
// is too large) so that /dev/zero or a huge file cannot exhaust memory.
func readManifestFile(path string) ([]byte, error) {
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
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: larger than %d bytes, the manifest size limit", path, manifest.MaxBytes)}
	}
	return data, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
