package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/scaffold"
	"github.com/spf13/cobra"
)

func newManifestInitCmd() *cobra.Command {
	var o scaffold.Options
	var out, aptTxt string
	cmd := &cobra.Command{
		Use:   "init DIR|GIT-URL",
		Short: "Scaffold a manifest from a package directory or git URL; placeholders are listed on stderr",
		Long:  help("manifest-init"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Source = args[0]
			return cli.Scaffold(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), out, aptTxt, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Commit, "commit", "", "the full commit to pin (default: a local HEAD, a git URL's default branch)")
	f.StringVar(&o.Archive, "archive", "", "pin the code as this archive (tar.gz or zip) by its SHA-256")
	f.StringVar(&o.DataDir, "data", "", "hash the data files under DIR (default: the package's data/)")
	f.StringVar(&o.DataURL, "data-url", "", "the https URL prefix the data files are published under")
	f.StringVar(&o.Image, "image", "", "the image NAME@sha256:… (default: a placeholder and the recipe to build)")
	f.StringVar(&o.Entrypoint, "entrypoint", "", `the command, split like a shell would ("Rscript main.R"); no shell runs`)
	f.StringVar(&o.Title, "title", "", "the claim's title")
	f.StringVar(&o.Citation, "citation", "", "the publication's citation")
	f.StringArrayVar(&o.Targets, "target", nil, "NAME=VALUE as the paper prints it (repeatable)")
	f.StringArrayVar(&o.Sources, "source", nil, "NAME=stdout|stderr|FILE:regex|json|csv:RULE (repeatable)")
	f.StringArrayVar(&o.Downloads, "download", nil, "a URL the code fetches while it runs: fetched and pinned by SHA-256 in downloads (spec v0.2; repeatable)")
	f.StringVar(&out, "out", "", "write the manifest to this new file instead of stdout")
	f.BoolVar(&o.Policy.AllowPrivate, "allow-private-urls", false, "fetch a git URL over http or from private addresses, and the Debian Contents index from a loopback or private mirror")
	f.StringVar(&o.Policy.TrustCAFile, "trust-ca", os.Getenv(runner.TrustCAEnv), "PEM file of extra CAs for https fetches (--download, a git URL) (default $"+runner.TrustCAEnv+")")
	f.StringVar(&o.CacheDir, "cache", cli.DefaultCacheDir(), "cache directory (the image store --image is read from; the Debian Contents index)")
	f.StringVar(&aptTxt, "write-apt-txt", "", "write the offered apt.txt (Debian packages the image lacks) to this new file")
	f.StringArrayVar(&o.AptSources, "apt-sources", scaffold.DefaultAptSources(), "apt source files naming the Debian mirror")
	f.BoolVar(&o.NoArchive, "no-archive", false, "do not fetch the Debian archive's Contents index (packages of what the image lacks stay unnamed)")
	return cmd
}

func newManifestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifest",
		Short: "Scaffold or validate a replication manifest, or print its canonical identity",
	}
	cmd.AddCommand(newManifestInitCmd())
	var allowPrivate bool
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Validate FILE against manifest spec v0.1 or v0.2 (exit 0 valid, 1 invalid)",
		Long:  help("manifest-validate"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, _, err := cli.LoadManifest(cmd.ErrOrStderr(), args[0], "")
			if err != nil {
				return err
			}
			// A valid manifest may still name what no server lists (a local
			// file for one's own rerun): say so, without failing.
			for _, d := range dotlab.ErrorDetail(manifest.CheckListing(m, false)) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: not listable: %s\n", args[0], d)
			}
			cli.WarnUnpullable(cmd.Context(), cmd.ErrOrStderr(), args[0], m, allowPrivate)
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid manifest spec v%s: %q, %d dataset%s, %d target%s\n", args[0], m.SpecVersion, m.Title,
				len(m.Datasets), cli.Plural(len(m.Datasets)), len(m.Targets), cli.Plural(len(m.Targets)))
			return nil
		},
	}
	validate.Flags().BoolVar(&allowPrivate, "allow-private-urls", false, "reach a loopback or private registry when checking that the image can be pulled")
	cmd.AddCommand(validate)
	cmd.AddCommand(&cobra.Command{
		Use:   "hash FILE",
		Short: "Print the manifest's canonical identity (SHA-256 of its RFC 8785 form)",
		Long:  help("manifest-hash"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := cli.ReadManifestFile(args[0])
			if err != nil {
				return err
			}
			h, err := manifest.Hash(data)
			if err != nil {
				var de *dotlab.Error
				if errors.As(err, &de) {
					return &cli.ExitError{Code: 1, Err: fmt.Errorf("%s: %s", args[0], de.Detail[0])}
				}
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h)
			return nil
		},
	})
	return cmd
}
