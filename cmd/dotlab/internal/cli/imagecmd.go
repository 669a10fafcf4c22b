package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/imagebuild"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/netpolicy"
	"github.com/dotlab/dotlab/runner"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/spf13/cobra"
)

// StoreRunE is a cobra RunE that opens the image store for run (cmd/dotlab's withStore).
type StoreRunE func(run func(*cobra.Command, []string, *imagestore.Store) error) func(*cobra.Command, []string) error

// imageBuildFlags are `dotlab image build`'s flags.
type imageBuildFlags struct {
	ref, containerfile, base     string
	env, labels                  []string
	gzip, allowPrivate           bool
	egress, aptSources           []string
	pipIndex, cran, debianMirror string
	trustCA                      string
	timeout                      time.Duration
	memoryMiB, diskGiB           int64
}

// NewImageBuildCmd is `dotlab image build`: a root filesystem packed, a
// Containerfile built (--containerfile) or a package's repo2docker files
// built over a base (--base). long is the command's help text.
func NewImageBuildCmd(withStore StoreRunE, long string) *cobra.Command {
	f := &imageBuildFlags{}
	cmd := &cobra.Command{
		Use:   "build ROOTFS_DIR --ref NAME | build --containerfile PATH [CONTEXT] --ref NAME | build --base NAME@sha256:… [PACKAGE_DIR] --ref NAME",
		Short: "Build an image (a root filesystem, a Containerfile, or a package's apt.txt/requirements.txt/install.R/DESCRIPTION); print the digest",
		Long:  long,
		Args:  f.args,
		RunE: withStore(func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			d, cached, err := f.run(cmd.Context(), cmd.ErrOrStderr(), s, args)
			if err != nil {
				return err
			}
			if cached {
				fmt.Fprintf(cmd.ErrOrStderr(), "reused an identical earlier build\n")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s@%s\n", d, f.ref, d)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.ref, "ref", "", "image name, e.g. localhost/lab/python (required)")
	fl.BoolVar(&f.gzip, "gzip", false, "ROOTFS_DIR: gzip-compress the layer (deterministic)")
	fl.StringArrayVar(&f.env, "env", nil, "ROOTFS_DIR: KEY=VALUE to add to the image config's Env (repeatable)")
	fl.StringArrayVar(&f.labels, "label", nil, "ROOTFS_DIR: KEY=VALUE image config label (repeatable)")
	fl.StringVar(&f.containerfile, "containerfile", "", "build this Containerfile/Dockerfile with buildah (CONTEXT defaults to its directory)")
	fl.StringVar(&f.base, "base", "", "build PACKAGE_DIR's repo2docker files over this image (NAME@sha256:…)")
	fl.StringArrayVar(&f.egress, "egress", nil, "HOST:PORT or URL build steps may reach through the egress proxy (repeatable; the repositories below are added)")
	fl.StringArrayVar(&f.aptSources, "apt-source", nil, "apt sources line used for apt.txt instead of the base's (repeatable)")
	fl.StringVar(&f.debianMirror, "debian-mirror", imagebuild.DefaultDebianMirror, "the Debian mirror the base's apt sources name (admitted for apt.txt)")
	fl.StringVar(&f.pipIndex, "pip-index", imagebuild.DefaultPipIndex, "the pip index (PEP 503) requirements.txt installs from")
	fl.StringVar(&f.cran, "cran", imagebuild.DefaultCRAN, "the CRAN-like repository install.R and DESCRIPTION install from")
	fl.BoolVar(&f.allowPrivate, "allow-private-urls", false, "admit loopback and private-address mirrors, indexes and registries (local testing)")
	fl.StringVar(&f.trustCA, "trust-ca", os.Getenv(runner.TrustCAEnv), "PEM file of extra CAs for registries (default $"+runner.TrustCAEnv+")")
	fl.DurationVar(&f.timeout, "timeout", imagebuild.DefaultTimeout, "bound on the whole build")
	fl.Int64Var(&f.memoryMiB, "max-memory-mib", imagebuild.DefaultMemoryBytes>>20, "memory bound of each build step, MiB")
	fl.Int64Var(&f.diskGiB, "max-disk-gib", imagebuild.DefaultDiskBytes>>30, "disk the build may consume, GiB")
	cmd.MarkFlagRequired("ref")
	return cmd
}

func (f *imageBuildFlags) args(cmd *cobra.Command, args []string) error {
	if f.containerfile != "" || f.base != "" {
		if f.containerfile != "" && f.base != "" {
			return errors.New("give --containerfile or --base, not both")
		}
		return cobra.MaximumNArgs(1)(cmd, args)
	}
	if err := cobra.ExactArgs(1)(cmd, args); err != nil {
		return err
	}
	if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: not a directory: give the root filesystem to pack", args[0])
	}
	if looksLikePackage(args[0]) {
		return fmt.Errorf("%s is a package, not a root filesystem: build its Containerfile with --containerfile PATH, or its apt.txt/requirements.txt/install.R/DESCRIPTION with --base NAME@sha256:…", args[0])
	}
	return nil
}

// looksLikePackage: no usr/ or bin/, and a Containerfile or repo2docker file.
func looksLikePackage(dir string) bool {
	for _, d := range []string{"usr", "bin"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
			return false
		}
	}
	for _, n := range []string{"Containerfile", "Dockerfile", "apt.txt", "requirements.txt", "install.R", "DESCRIPTION", "environment.yml", "binder"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// run performs the build the flags ask for.
func (f *imageBuildFlags) run(ctx context.Context, stderr io.Writer, s *imagestore.Store, args []string) (v1.Hash, bool, error) {
	if f.containerfile == "" && f.base == "" {
		lbl, err := imagestore.ParseLabels(f.labels)
		if err != nil {
			return v1.Hash{}, false, err
		}
		d, err := s.BuildWith(args[0], f.ref, imagestore.BuildOptions{Gzip: f.gzip, Env: f.env, Labels: lbl})
		return d, false, err
	}
	policy := runner.Policy{AllowPrivate: f.allowPrivate, TrustCAFile: f.trustCA}
	o := imagebuild.Options{Store: s, Ref: f.ref, Egress: f.egress, Rules: netpolicy.Rules{AllowPrivate: f.allowPrivate},
		Pull:    imagestore.PullOptions{Transport: policy.Transport(), AllowHTTP: f.allowPrivate},
		Timeout: f.timeout, MemoryBytes: f.memoryMiB << 20, DiskBytes: f.diskGiB << 30, Log: stderr}
	if f.base != "" {
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		repos := imagebuild.Repositories{AptSources: f.aptSources, DebianMirror: f.debianMirror, PipIndex: f.pipIndex, CRAN: f.cran}
		res, err := imagebuild.BuildPackage(ctx, dir, f.base, repos, o)
		return res.Digest, res.Cached, err
	}
	text, err := os.ReadFile(f.containerfile)
	if err != nil {
		return v1.Hash{}, false, err
	}
	o.Containerfile, o.Context = text, filepath.Dir(f.containerfile)
	if len(args) == 1 {
		o.Context = args[0]
	}
	res, err := imagebuild.Build(ctx, o)
	return res.Digest, false, err
}

// NewImagePushCmd is `dotlab image push`.
func NewImagePushCmd(withStore StoreRunE, long string) *cobra.Command {
	var allowPrivate bool
	var trustCA string
	cmd := &cobra.Command{
		Use:   "push NAME@sha256:DIGEST REGISTRY/REPOSITORY[:TAG]",
		Short: "Publish a store image to an OCI registry; print REGISTRY/REPOSITORY@sha256:…",
		Long:  long,
		Args:  cobra.ExactArgs(2),
		RunE: withStore(func(cmd *cobra.Command, args []string, s *imagestore.Store) error {
			ref := args[0]
			if i := strings.LastIndex(ref, "@"); i >= 0 {
				ref = ref[i+1:]
			}
			d, err := imagestore.ParseDigest(ref)
			if err != nil {
				return fmt.Errorf("%s: name the image as NAME@sha256:<64 hex> (`dotlab image list`)", args[0])
			}
			p := runner.Policy{AllowPrivate: allowPrivate, TrustCAFile: trustCA}
			pushed, err := s.Push(cmd.Context(), d, args[1], imagestore.PushOptions{Transport: p.Transport(), AllowHTTP: allowPrivate})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), pushed.String())
			return nil
		}),
	}
	cmd.Flags().BoolVar(&allowPrivate, "allow-private-urls", false, "admit plain-http, loopback and private-address registries (local testing)")
	cmd.Flags().StringVar(&trustCA, "trust-ca", os.Getenv(runner.TrustCAEnv), "PEM file of extra CAs for the registry (default $"+runner.TrustCAEnv+")")
	return cmd
}

// WarnUnpullable warns on stderr (never fails) when the manifest's image
// cannot be pulled by digest from its registry by an anonymous client, as
// a runner on another machine would: the image may be only in this
// machine's store. It asks for the manifest only, within 20 seconds.
func WarnUnpullable(ctx context.Context, stderr io.Writer, path string, m *dotlab.Manifest, allowPrivate bool) {
	ref := m.Environment.Image
	if ref == "" {
		return
	}
	p := runner.Policy{AllowPrivate: allowPrivate, TrustCAFile: os.Getenv(runner.TrustCAEnv)}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := imagestore.Pullable(ctx, ref, imagestore.PullOptions{Transport: p.Transport(), AllowHTTP: allowPrivate}); err != nil {
		fmt.Fprintf(stderr, "%s: warning: $.environment.image: %s cannot be pulled from its registry by digest (%v): %s\n", path, ref, err, UnpullableHint(err))
	}
}

// UnpullableHint is the fix for why imagestore.Pullable refused: a plain
// http or private registry needs --allow-private-urls (local testing
// only); a 401/403 means the repository is not public-read, as runners
// pull anonymously; anything else (not found, no such host) means the
// image is only in this machine's store.
func UnpullableHint(err error) string {
	var dns *net.DNSError
	var te *transport.Error
	switch {
	case errors.Is(err, imagestore.ErrPlainHTTP), errors.Is(err, netpolicy.ErrRefused):
		return "a plain-http, loopback or private-address registry is reached only with --allow-private-urls (local testing; a public server refuses it): push the image to a public registry with dotlab image push"
	case errors.Is(err, imagestore.ErrNeedsCredentials):
		return "runners pull anonymously: make the repository public-read on the registry, or push the image to one that is"
	case errors.As(err, &dns), errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		return "only in this machine's store: push it with dotlab image push, and name the pushed REGISTRY/REPOSITORY@sha256:…"
	}
	return "if it is only in this machine's store, push it with dotlab image push and name the pushed REGISTRY/REPOSITORY@sha256:…; if the registry was unreachable, validate again later"
}
