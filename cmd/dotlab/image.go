package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/dotlab/dotlab"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/cli"
	"github.com/dotlab/dotlab/runner"
	"github.com/spf13/cobra"
)

func newImageCmd() *cobra.Command {
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the local OCI image store (import, build, pull, list, show)",
		Long: `The local image store keeps OCI images by digest under CACHE/images (an OCI
image layout) and their unpacked root filesystems under CACHE/images/rootfs.
dotlab rerun resolves environment.image there first, by digest only.`,
	}
	cmd.PersistentFlags().StringVar(&cacheDir, "cache", cli.DefaultCacheDir(), "cache directory (images and downloads)")
	cmd.AddCommand(newImageImportCmd(&cacheDir), newImageBuildCmd(&cacheDir), newImagePullCmd(&cacheDir), newImageListCmd(&cacheDir), newImageShowCmd(&cacheDir))
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
		Long: `Load the image(s) at PATH into the local store, verifying every blob, and
print one line per image: DIGEST and its name. PATH may be an OCI image layout
directory, an OCI archive (tar or tar.gz of such a directory; docker save of
Docker 25 and later writes one) or a classic docker-save tarball. Pin the image
in a manifest as NAME@DIGEST.`,
		Args: cobra.ExactArgs(1),
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

func newImageBuildCmd(cacheDir *string) *cobra.Command {
	var ref string
	var gz bool
	var env, labels []string
	cmd := &cobra.Command{
		Use:   "build ROOTFS_DIR --ref NAME",
		Short: "Pack a directory into a deterministic single-layer image; print the digest",
		Long: `Pack ROOTFS_DIR into a single-layer OCI image and import it. The packing is
deterministic (sorted entries, mtimes at the Unix epoch, owner 0:0,
uncompressed layer), so the same tree gives the same digest on any machine.
--gzip compresses the layer deterministically (compress/gzip at a fixed level,
no name or mtime in the header): the same tree gives the same digest with the
same dotlab. --env KEY=VALUE adds to the config's Env after PATH; --label
KEY=VALUE sets a config label (the recipes in examples/images record their
installed packages as org.dotlab.packages; see dotlab image show).
Prints DIGEST and NAME@DIGEST, the reference to put in environment.image.
Make /tmp in the tree mode 1777.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return err
			}
			if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s: not a directory: give the root filesystem to pack", args[0])
			}
			return nil
		},
		RunE: withStore(cacheDir, func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			o := imagestore.BuildOptions{Gzip: gz, Env: env}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return fmt.Errorf("--label %q: want KEY=VALUE", l)
				}
				if o.Labels == nil {
					o.Labels = map[string]string{}
				}
				o.Labels[k] = v
			}
			d, err := s.BuildWith(args[0], ref, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s@%s\n", d, ref, d)
			return nil
		}),
	}
	cmd.Flags().StringVar(&ref, "ref", "", "image name, e.g. localhost/lab/python (required)")
	cmd.Flags().BoolVar(&gz, "gzip", false, "gzip-compress the layer (deterministic)")
	cmd.Flags().StringArrayVar(&env, "env", nil, "KEY=VALUE to add to the image config's Env (repeatable)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "KEY=VALUE image config label (repeatable)")
	cmd.MarkFlagRequired("ref")
	return cmd
}

func newImagePullCmd(cacheDir *string) *cobra.Command {
	var allowPrivate bool
	cmd := &cobra.Command{
		Use:   "pull NAME@sha256:DIGEST",
		Short: "Pull an image by digest into the local store (tags are refused)",
		Args:  cobra.ExactArgs(1),
		RunE: withStore(cacheDir, func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			p := runner.Policy{AllowPrivate: allowPrivate}
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
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", img.Digest, how)
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

// imageInfo is what dotlab image show prints.
type imageInfo struct {
	Digest         string            `json:"digest"`
	ManifestDigest string            `json:"manifest_digest,omitempty"`
	Refs           []string          `json:"refs,omitempty"`
	OS             string            `json:"os"`
	Architecture   string            `json:"architecture"`
	Env            []string          `json:"env,omitempty"`
	Layers         []layerInfo       `json:"layers"`
	CompressedSize int64             `json:"compressed_size"`
	Labels         map[string]string `json:"labels,omitempty"`
	Packages       []string          `json:"packages,omitempty"`
}

type layerInfo struct {
	Digest    string `json:"digest"`
	DiffID    string `json:"diff_id"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
}

func newImageShowCmd(cacheDir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME@sha256:DIGEST | sha256:DIGEST",
		Short: "Show an image in the local store: config, layers and installed packages",
		Long: `Print an image of the local store: its digest, names, platform, Env, layers
(digest, diff_id, media type, compressed size) and labels, and the installed
package list ("package=version" a line) when the image records one under the
label org.dotlab.packages, as the recipes in examples/images do (the same list
is in the image as /usr/share/dotlab/packages.txt). With --json, one object
whose "packages" field is that list and whose "labels" omit it.`,
		Args: cobra.ExactArgs(1),
		RunE: withStore(cacheDir, func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			ref := args[0]
			dig := ref
			if i := strings.LastIndex(ref, "@"); i >= 0 {
				dig = ref[i+1:]
			}
			d, err := imagestore.ParseDigest(dig)
			if err != nil {
				return err
			}
			img, err := s.Image(d)
			if err != nil {
				return err
			}
			info := imageInfo{Digest: img.Digest.String(), OS: img.Config.OS, Architecture: img.Config.Architecture,
				Env: img.Config.Config.Env, Packages: img.Packages()}
			if img.ManifestDigest != img.Digest {
				info.ManifestDigest = img.ManifestDigest.String()
			}
			entries, err := s.List()
			if err != nil {
				return err
			}
			for _, e := range entries {
				if e.Digest == info.Digest && e.Ref != "" {
					info.Refs = append(info.Refs, e.Ref)
				}
			}
			for i, l := range img.Manifest.Layers {
				info.Layers = append(info.Layers, layerInfo{Digest: l.Digest.String(), DiffID: img.Config.RootFS.DiffIDs[i].String(),
					MediaType: string(l.MediaType), Size: l.Size})
				info.CompressedSize += l.Size
			}
			for k, v := range img.Config.Config.Labels {
				if k == imagestore.PackagesLabel {
					continue
				}
				if info.Labels == nil {
					info.Labels = map[string]string{}
				}
				info.Labels[k] = v
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), info)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "digest\t%s\n", info.Digest)
			if info.ManifestDigest != "" {
				fmt.Fprintf(w, "manifest\t%s\n", info.ManifestDigest)
			}
			for _, r := range info.Refs {
				fmt.Fprintf(w, "name\t%s\n", r)
			}
			fmt.Fprintf(w, "platform\t%s/%s\n", info.OS, info.Architecture)
			for _, e := range info.Env {
				fmt.Fprintf(w, "env\t%s\n", e)
			}
			for _, l := range info.Layers {
				fmt.Fprintf(w, "layer\t%s\t%s\t%d bytes\n", l.Digest, l.MediaType, l.Size)
			}
			keys := make([]string, 0, len(info.Labels))
			for k := range info.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "label\t%s=%s\n", k, info.Labels[k])
			}
			for _, p := range info.Packages {
				fmt.Fprintf(w, "package\t%s\n", p)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
