package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/runner"
	"github.com/spf13/cobra"
)

// defaultCacheDir is where images and downloads are kept unless --cache says
// otherwise: $XDG_CACHE_HOME/dotlab or ~/.cache/dotlab.
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dotlab")
	}
	return filepath.Join(os.TempDir(), "dotlab-cache")
}

func openImageStore(cacheDir string) (*imagestore.Store, error) {
	return imagestore.Open(filepath.Join(cacheDir, "images"))
}

func newImageCmd() *cobra.Command {
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the local OCI image store (import, build, pull, list)",
		Long: `The local image store keeps OCI images by digest under CACHE/images (an OCI
image layout) and their unpacked root filesystems under CACHE/images/rootfs.
dotlab rerun resolves environment.image there first, by digest only.`,
	}
	cmd.PersistentFlags().StringVar(&cacheDir, "cache", defaultCacheDir(), "cache directory (images and downloads)")

	var importRef string
	importCmd := &cobra.Command{
		Use:   "import PATH",
		Short: "Load an OCI layout directory, OCI archive or docker-save tarball; print the digest",
		Long: `Load the image(s) at PATH into the local store, verifying every blob, and
print one line per image: DIGEST and its name. PATH may be an OCI image layout
directory, an OCI archive (tar or tar.gz of such a directory; docker save of
Docker 25 and later writes one) or a classic docker-save tarball. Pin the image
in a manifest as NAME@DIGEST.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openImageStore(cacheDir)
			if err != nil {
				return err
			}
			imported, err := s.Import(args[0], importRef)
			if err != nil {
				return err
			}
			for _, im := range imported {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", im.Digest, im.Ref)
			}
			return nil
		},
	}
	importCmd.Flags().StringVar(&importRef, "ref", "", "name to record for the imported image(s) (default: the names they carry)")

	var buildRef string
	buildCmd := &cobra.Command{
		Use:   "build ROOTFS_DIR --ref NAME",
		Short: "Pack a directory into a deterministic single-layer image; print the digest",
		Long: `Pack ROOTFS_DIR into a single-layer OCI image and import it. The packing is
deterministic (sorted entries, mtimes at the Unix epoch, owner 0:0,
uncompressed layer), so the same tree gives the same digest on any machine.
Prints DIGEST and NAME@DIGEST, the reference to put in environment.image.
Make /tmp in the tree mode 1777.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s: not a directory: give the root filesystem to pack", args[0])
			}
			s, err := openImageStore(cacheDir)
			if err != nil {
				return err
			}
			d, err := s.Build(args[0], buildRef)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s@%s\n", d, buildRef, d)
			return nil
		},
	}
	buildCmd.Flags().StringVar(&buildRef, "ref", "", "image name, e.g. localhost/lab/python (required)")
	buildCmd.MarkFlagRequired("ref")

	var allowPrivate bool
	pullCmd := &cobra.Command{
		Use:   "pull NAME@sha256:DIGEST",
		Short: "Pull an image by digest into the local store (tags are refused)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openImageStore(cacheDir)
			if err != nil {
				return err
			}
			p := runner.Policy{AllowPrivate: allowPrivate}
			opts := imagestore.PullOptions{Transport: p.Transport(), AllowHTTP: allowPrivate}
			if isTerminal(cmd.ErrOrStderr()) {
				pl := &progressLine{w: cmd.ErrOrStderr(), clock: time.Now}
				opts.Progress = func(done, total int64) { pl.update("pull", done, total) }
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
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", img.Digest, how)
			return nil
		},
	}
	pullCmd.Flags().BoolVar(&allowPrivate, "allow-private-urls", false, "admit plain-http, loopback and private-address registries (local testing)")

	var asJSON bool
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the images in the local store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openImageStore(cacheDir)
			if err != nil {
				return err
			}
			entries, err := s.List()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(entries)
			}
			for _, e := range entries {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", e.Digest, e.Ref)
			}
			return nil
		},
	}
	listCmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(importCmd, buildCmd, pullCmd, listCmd)
	return cmd
}
