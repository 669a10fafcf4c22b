package main

import (
	"fmt"
	"os"

	"github.com/dotlab/dotlab"

	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/runner"
	"github.com/spf13/cobra"
)

func newImageCmd() *cobra.Command {
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the local OCI image store (import, build, pull, push, list, show)",
		Long:  help("image"),
	}
	cmd.PersistentFlags().StringVar(&cacheDir, "cache", cli.DefaultCacheDir(), "cache directory (images and downloads)")
	store := func(run func(*cobra.Command, []string, *imagestore.Store) error) func(*cobra.Command, []string) error {
		return withStore(&cacheDir, run)
	}
	cmd.AddCommand(newImageImportCmd(&cacheDir), cli.NewImageBuildCmd(store, help("image-build")), newImagePullCmd(&cacheDir),
		cli.NewImagePushCmd(store, help("image-push")), newImageListCmd(&cacheDir), newImageShowCmd(&cacheDir))
	return cmd
}

// withStore is a RunE that opens the image store under *cacheDir for run.
func withStore(cacheDir *string, run func(*cobra.Command, []string, *imagestore.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := runner.OpenImageStore(*cacheDir)
		if err != nil {
			return err
		}
		return run(cmd, args, s)
	}
}

func newImageImportCmd(cacheDir *string) *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:   "import PATH",
		Short: "Load an OCI layout directory, OCI archive or docker-save tarball; print the digest",
		Long:  help("image-import"),
		Args:  cobra.ExactArgs(1),
		RunE: withStore(cacheDir, func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			imported, err := s.Import(args[0], ref)
			if err != nil {
				return err
			}
			for _, im := range imported {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", im.Digest, im.Ref)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&ref, "ref", "", "name to record for the imported image(s) (default: the names they carry)")
	return cmd
}

func newImagePullCmd(cacheDir *string) *cobra.Command {
	var allowPrivate bool
	cmd := &cobra.Command{
		Use:   "pull NAME@sha256:DIGEST",
		Short: "Pull an image by digest into the local store (tags are refused)",
		Args:  cobra.ExactArgs(1),
		RunE: withStore(cacheDir, func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			p := runner.Policy{AllowPrivate: allowPrivate, TrustCAFile: os.Getenv(runner.TrustCAEnv)}
			opts := imagestore.PullOptions{Transport: p.Transport(), AllowHTTP: allowPrivate}
			if cli.IsTerminal(cmd.ErrOrStderr()) {
				pl := cli.NewProgress(cmd.ErrOrStderr(), dotlab.SystemClock{})
				opts.Progress = func(done, total int64) { pl.Update("pull", done, total) }
				defer fmt.Fprintln(cmd.ErrOrStderr())
			}
			img, pulled, err := s.Resolve(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			how := "already in the local store"
			if pulled {
				how = "pulled and verified"
			}
			// The last line, as the other image commands print it:
			// DIGEST<TAB>NAME@DIGEST (README "CLI reference").
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", args[0], how)
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", img.Digest, args[0])
			return nil
		}),
	}
	cmd.Flags().BoolVar(&allowPrivate, "allow-private-urls", false, "admit plain-http, loopback and private-address registries (local testing)")
	return cmd
}

func newImageListCmd(cacheDir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the images in the local store",
		Args:  cobra.NoArgs,
		RunE: withStore(cacheDir, func(cmd *cobra.Command, _ []string, s *imagestore.Store) error {
			entries, err := s.List()
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), entries)
			}
			for _, e := range entries {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", e.Digest, e.Ref)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newImageShowCmd(cacheDir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME@sha256:DIGEST | sha256:DIGEST",
		Short: "Show an image in the local store: config, layers and installed packages",
		Long:  help("image-show"),
		Args:  cobra.ExactArgs(1),
		RunE: withStore(cacheDir, func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			info, err := s.Describe(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), info)
			}
			return info.WriteText(cmd.OutOrStdout())
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
