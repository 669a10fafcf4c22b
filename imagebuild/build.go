package imagebuild

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/netpolicy"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Build bounds, used when an Options field is zero.
const (
	DefaultTimeout     = 30 * time.Minute
	DefaultMemoryBytes = 4 << 30
	DefaultDiskBytes   = 32 << 30
)

// Options are one build's inputs and bounds.
type Options struct {
	Store *imagestore.Store
	// Ref is the name recorded for the result in the store.
	Ref string
	// Context is the build context directory (the package), read by COPY/ADD.
	Context string
	// Containerfile is the Containerfile's text (ParseContainerfile checks it).
	Containerfile []byte
	// Egress lists the HOST:PORT (or URLs) build steps may reach through
	// the egress proxy: the Debian mirror, the pip index, the CRAN-like
	// repository. Nothing else is reachable.
	Egress []string
	// Rules are the fetch rules for the egress hosts and the addresses they
	// resolve to (netpolicy.Rules{AllowPrivate} for a loopback mirror).
	Rules netpolicy.Rules
	// Pull reaches a registry for a FROM image not in the store.
	Pull imagestore.PullOptions
	// Timeout, MemoryBytes and DiskBytes bound the build: wall time of the
	// whole build, memory of each build step (a cgroup limit), and the disk
	// the build may consume on the work directory's file system.
	Timeout     time.Duration
	MemoryBytes int64
	DiskBytes   int64
	// WorkDir holds buildah's storage (base images stay imported there
	// between builds); empty means STORE/buildah.
	WorkDir string
	// Log receives buildah's output and the time of each phase (nil: discarded).
	Log io.Writer
	// Clock times the phases (nil: the system clock).
	Clock dotlab.Clock
}

// Result is a finished build.
type Result struct {
	Digest v1.Hash
	// Layers is the number of new layers on top of the base.
	Layers int
	// Cached is true when an identical earlier build was reused.
	Cached bool
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.DiskBytes <= 0 {
		o.DiskBytes = DefaultDiskBytes
	}
	if o.WorkDir == "" {
		o.WorkDir = filepath.Join(o.Store.Dir(), "buildah")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Clock == nil {
		o.Clock = dotlab.SystemClock{}
	}
}

// phase logs how long the phase that started at start took.
func (b *buildah) phase(what string, start time.Time) {
	fmt.Fprintf(b.o.Log, "dotlab image build: %s: %s\n", what, b.o.Clock.Now().Sub(start).Round(10*time.Millisecond))
}

// Build builds o.Containerfile with buildah and stores the result
// (docs/sandbox.md "Building an environment"):
//
//  1. the Containerfile is checked (ParseContainerfile) and every external
//     FROM image is resolved by digest (the store, else its registry) and
//     handed to buildah as an OCI layout;
//  2. buildah builds the checked text in a new network namespace whose only
//     reachable address is the egress proxy (Egress, admitting o.Egress),
//     with --isolation oci (runc: its own mount, PID, IPC and UTS
//     namespaces, no host mounts), a memory limit, --timestamp 0,
//     --omit-history, no identity label, and SOURCE_DATE_EPOCH=0 for RUN
//     steps; the whole build is bounded by o.Timeout and o.DiskBytes;
//  3. the result's new layers are normalized (normalizeLayer: the trims of
//     examples/images/lib.sh, canonical headers) and stored on top of the
//     base image's layers as they are (imagestore.Store.Extend), with a
//     config stripped of build metadata.
//
// A failing build step is reported with the tail of buildah's output and
// the egress proxy's refusals (which name EgressRule).
func Build(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	cf, err := ParseContainerfile(o.Containerfile)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	b, err := newBuildah(o)
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(b.tmp)
	unlock, err := lockStorage(o.WorkDir)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	bases := make([]*imagestore.Image, len(cf.Stages))
	names := make([]string, len(cf.Stages))
	start := o.Clock.Now()
	for i, st := range cf.Stages {
		if !st.External {
			continue
		}
		if bases[i], names[i], err = b.importBase(ctx, st.Base); err != nil {
			return Result{}, err
		}
	}
	b.phase("base images ready in buildah's storage", start)
	text := cf.Text(func(i int) string { return names[i] }, "ARG SOURCE_DATE_EPOCH=0")
	tag := "localhost/dotlab-build:" + nonce()
	start = o.Clock.Now()
	if err := b.run(ctx, text, tag); err != nil {
		return Result{}, err
	}
	b.phase("build steps", start)
	defer b.cmd(context.Background(), "rmi", tag).Run()
	start = o.Clock.Now()
	defer b.phase("new layers stored", start)
	return b.store(ctx, tag, rootBase(cf, bases))
}

// rootBase is the external image the last stage stands on (following
// FROM <stage>), or nil for scratch.
func rootBase(cf *Containerfile, bases []*imagestore.Image) *imagestore.Image {
	i := len(cf.Stages) - 1
	for cf.Stages[i].BaseStage >= 0 {
		i = cf.Stages[i].BaseStage
	}
	return bases[i]
}

// buildah runs the buildah binary on the build's own storage.
type buildah struct {
	o        Options
	root     string
	tmp      string // this build's scratch (layouts, the checked Containerfile)
	policy   string // a signature policy for local (oci:) pulls
	driver   string // storageDriver
	logTail  *tailBuffer
	proxyEnv []string
}

func newBuildah(o Options) (*buildah, error) {
	if _, err := exec.LookPath("buildah"); err != nil {
		return nil, errors.New("image build needs buildah (Debian package buildah)")
	}
	for _, d := range []string{"root", "run", "tmp"} {
		if err := os.MkdirAll(filepath.Join(o.WorkDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp(filepath.Join(o.WorkDir, "tmp"), "build-*")
	if err != nil {
		return nil, err
	}
	b := &buildah{o: o, root: o.WorkDir, tmp: tmp, policy: filepath.Join(tmp, "policy.json"), logTail: &tailBuffer{max: 2 << 10}}
	b.driver = storageDriver(o.WorkDir)
	if err := os.WriteFile(filepath.Join(tmp, "empty.conf"), nil, 0o600); err != nil {
		return nil, err
	}
	// Only local oci: layouts of verified store images are ever pulled.
	return b, os.WriteFile(b.policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o600)
}

// lockStorage takes an exclusive flock on workDir/lock: one build at a
// time per buildah storage, so a failed build can remove every working
// container it finds.
func lockStorage(workDir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(workDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// storageDriver is the containers/storage driver for buildah's storage
// under workDir: overlay where the file system supports it (layers shared,
// nothing copied), else vfs (every layer a full copy: slower, works on any
// file system, e.g. inside a container whose root is itself an overlay).
// The choice is tried once and kept in workDir/driver: a storage cannot
// change driver.
func storageDriver(workDir string) string {
	file := filepath.Join(workDir, "driver")
	if data, err := os.ReadFile(file); err == nil {
		if d := strings.TrimSpace(string(data)); d == "overlay" || d == "vfs" {
			return d
		}
	}
	driver := "vfs"
	probe := exec.Command("buildah", "--root", filepath.Join(workDir, "root"), "--runroot", filepath.Join(workDir, "run"),
		"--storage-driver", "overlay", "images", "-q")
	if probe.Run() == nil {
		driver = "overlay"
	}
	os.WriteFile(file, []byte(driver+"\n"), 0o644)
	return driver
}

// cmd is a buildah command on the build's storage, its output logged.
func (b *buildah) cmd(ctx context.Context, args ...string) *exec.Cmd {
	// Empty mounts.conf and containers.conf: no default mounts, volumes,
	// devices or environment from the host's container configuration.
	empty := filepath.Join(b.tmp, "empty.conf")
	base := []string{"--root", filepath.Join(b.root, "root"), "--runroot", filepath.Join(b.root, "run"), "--storage-driver", b.driver,
		"--default-mounts-file", empty}
	c := exec.CommandContext(ctx, "buildah", append(base, args...)...)
	c.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + b.tmp, "TMPDIR=" + filepath.Join(b.root, "tmp"),
		"CONTAINERS_CONF=" + empty}, b.proxyEnv...)
	c.Stderr = io.MultiWriter(b.o.Log, b.logTail)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 10 * time.Second
	return c
}

// importBase resolves ref (the store, else its registry) and makes it a
// buildah image named localhost/dotlab-base:<manifest hex>, importing it
// once into buildah's storage.
func (b *buildah) importBase(ctx context.Context, ref string) (*imagestore.Image, string, error) {
	img, pulled, err := b.o.Store.Resolve(ctx, ref, b.o.Pull)
	if err != nil && (pulled || errors.Is(err, imagestore.ErrNotFound)) {
		dir := b.o.Store.Dir()
		return nil, "", fmt.Errorf("FROM %s: the base is not in the store %s (dotlab image list --cache %s) and pulling it failed: %w; pass the --cache that holds it, build it with its recipe (examples/images/RECIPE/build.sh), or pull it (dotlab image pull %s --cache %s)",
			ref, dir, dir, err, ref, dir)
	}
	if err != nil {
		return nil, "", fmt.Errorf("FROM %s: %w", ref, err)
	}
	name := "localhost/dotlab-base:" + img.ManifestDigest.Hex
	if b.cmd(ctx, "inspect", "--type", "image", name).Run() == nil {
		return img, name, nil
	}
	dir := filepath.Join(b.tmp, "base-"+img.ManifestDigest.Hex[:16])
	if err := b.o.Store.ExportLayout(img, dir, "base"); err != nil {
		return nil, "", err
	}
	// buildah names an image pulled from an oci: layout after its path,
	// which must then be a valid (lower-case) repository name: a symlink
	// of that form points at the layout.
	link := filepath.Join("/tmp", "dotlab-base-"+nonce())
	if err := os.Symlink(dir, link); err != nil {
		return nil, "", err
	}
	defer os.Remove(link)
	var out bytes.Buffer
	pull := b.cmd(ctx, "pull", "--quiet", "--signature-policy", b.policy, "oci:"+link+":base")
	pull.Stdout = &out
	if err := pull.Run(); err != nil {
		return nil, "", fmt.Errorf("FROM %s: buildah could not read the store image: %v: %s", ref, err, b.logTail)
	}
	id := strings.TrimSpace(out.String())
	if err := b.cmd(ctx, "tag", id, name).Run(); err != nil {
		return nil, "", fmt.Errorf("FROM %s: buildah tag: %v: %s", ref, err, b.logTail)
	}
	return img, name, nil
}

// run builds the checked Containerfile text as tag inside the build's
// network namespace, the egress proxy serving its loopback.
func (b *buildah) run(ctx context.Context, text, tag string) error {
	file := filepath.Join(b.tmp, "Containerfile")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		return err
	}
	eg, err := NewEgress(EgressOptions{Allow: b.o.Egress, Rules: b.o.Rules})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopDisk := watchDisk(ctx, cancel, filepath.Join(b.root, "root"), b.o.DiskBytes)
	defer stopDisk()
	err = inBuildNetns(func(l net.Listener) error {
		go eg.Serve(ctx, l)
		proxy := "http://" + l.Addr().String()
		b.proxyEnv = []string{"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy}
		defer func() { b.proxyEnv = nil }()
		c := b.cmd(ctx, "build", "--isolation", "oci", "--network", "host", "--pull-never",
			"--timestamp", "0", "--omit-history", "--identity-label=false", "--layers=false",
			"--memory", fmt.Sprint(b.o.MemoryBytes), "--memory-swap", fmt.Sprint(b.o.MemoryBytes),
			"--http-proxy=true", "--build-arg", "SOURCE_DATE_EPOCH=0", "--no-hosts=false",
			"-f", file, "-t", tag, b.o.Context)
		c.Stdout = b.o.Log
		// A PID namespace of its own (util-linux unshare, with its /proc):
		// when buildah, its init, ends, killed at the time bound or not,
		// the kernel kills every process of the build with it (the step's
		// runc container included, which runc puts in a session of its
		// own, out of reach of a process-group kill); and a mount namespace
		// of its own, so a killed build's mounts go with it.
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			return errors.New("image build needs unshare (Debian package util-linux)")
		}
		c.Path, c.Args = unshare, append([]string{"unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "buildah"}, c.Args[1:]...)
		c.SysProcAttr.Pdeathsig = syscall.SIGKILL
		return c.Run()
	})
	if err != nil {
		// A killed build leaves its working container (and its mount):
		// builds of one storage are serialized (Build's lock), so every
		// working container here is this build's.
		b.cmd(context.Background(), "rm", "--all").Run()
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
		if errors.Is(cause, context.DeadlineExceeded) {
			err = fmt.Errorf("build took longer than %s: %w (bounded build; raise --timeout)", b.o.Timeout, ErrRefused)
		}
	}
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("build step failed: %v\n%s", err, b.logTail)
	if ref := eg.Refused(); len(ref) > 0 {
		msg += "\n" + strings.Join(ref, "\n")
	}
	return errors.New(msg)
}

// store exports the built image and stores it on top of base.
func (b *buildah) store(ctx context.Context, tag string, base *imagestore.Image) (Result, error) {
	out := filepath.Join(b.tmp, "out")
	if err := placeholders(out, base); err != nil {
		return Result{}, err
	}
	if err := b.cmd(ctx, "push", "--quiet", "--disable-compression", "--signature-policy", b.policy, tag, "oci:"+out+":out").Run(); err != nil {
		return Result{}, fmt.Errorf("buildah push: %v: %s", err, b.logTail)
	}
	built, err := readLayout(out)
	if err != nil {
		return Result{}, err
	}
	cfg, err := built.ConfigFile()
	if err != nil {
		return Result{}, err
	}
	layers, err := built.Layers()
	if err != nil {
		return Result{}, err
	}
	n := 0
	if base != nil {
		n = len(base.Config.RootFS.DiffIDs)
		if len(cfg.RootFS.DiffIDs) < n {
			return Result{}, errors.New("built image has fewer layers than its base")
		}
		for i, d := range base.Config.RootFS.DiffIDs {
			if cfg.RootFS.DiffIDs[i] != d {
				return Result{}, fmt.Errorf("built image's layer %d is not its base's (%s, want %s)", i, cfg.RootFS.DiffIDs[i], d)
			}
		}
	}
	var paths []string
	var pkgs layerInfo
	for i, l := range layers[n:] {
		p := filepath.Join(b.tmp, fmt.Sprintf("layer-%d.tar", i))
		info, err := writeNormalized(l, p)
		if err != nil {
			return Result{}, err
		}
		pkgs.dpkgChanged = pkgs.dpkgChanged || info.dpkgChanged
		if info.packagesFound {
			pkgs.packages, pkgs.packagesFound = info.packages, true
		}
		paths = append(paths, p)
	}
	d, err := b.o.Store.Extend(base, packagesLabel(stripConfig(*cfg), pkgs), paths, b.o.Ref)
	return Result{Digest: d, Layers: len(paths)}, err
}

// placeholders writes an empty blob file in the OCI layout dir for each of
// base's layers (by diff_id and by layer digest): buildah's push finds them
// "already present" and does not write the base's layers again (gigabytes
// for a scientific image), only the new ones. Only the new layers and the
// config are read back.
func placeholders(dir string, base *imagestore.Image) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return err
	}
	if base == nil {
		return nil
	}
	var ds []v1.Hash
	ds = append(ds, base.Config.RootFS.DiffIDs...)
	for _, l := range base.Manifest.Layers {
		ds = append(ds, l.Digest)
	}
	for _, d := range ds {
		if err := os.WriteFile(filepath.Join(blobs, d.Hex), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func readLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("buildah wrote %d images, want 1", len(im.Manifests))
	}
	return idx.Image(im.Manifests[0].Digest)
}

// writeNormalized writes layer l, normalized, as an uncompressed tar at p.
func writeNormalized(l v1.Layer, p string) (layerInfo, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return layerInfo{}, err
	}
	defer rc.Close()
	f, err := os.Create(p)
	if err != nil {
		return layerInfo{}, err
	}
	info, err := normalizeLayer(rc, f)
	if err != nil {
		f.Close()
		return info, err
	}
	return info, f.Close()
}

// packagesLabel keeps the image's package label (imagestore.PackagesLabel)
// true: set from the package list the new layers wrote, dropped when they
// changed dpkg's status without writing one (the inherited list is stale).
func packagesLabel(c v1.ConfigFile, info layerInfo) v1.ConfigFile {
	switch {
	case info.packagesFound:
		if c.Config.Labels == nil {
			c.Config.Labels = map[string]string{}
		}
		c.Config.Labels[imagestore.PackagesLabel] = strings.TrimRight(string(info.packages), "\n")
	case info.dpkgChanged && c.Config.Labels != nil:
		delete(c.Config.Labels, imagestore.PackagesLabel)
		if len(c.Config.Labels) == 0 {
			c.Config.Labels = nil
		}
	}
	return c
}

// stripConfig keeps what runs the image (environment, entrypoint, command,
// user, working directory, labels but buildah's) and drops build metadata:
// history, times, host and builder names.
func stripConfig(c v1.ConfigFile) v1.ConfigFile {
	out := v1.ConfigFile{Architecture: c.Architecture, OS: c.OS, Variant: c.Variant, Created: v1.Time{Time: time.Unix(0, 0).UTC()}}
	out.Config = v1.Config{Env: c.Config.Env, Entrypoint: c.Config.Entrypoint, Cmd: c.Config.Cmd, User: c.Config.User,
		WorkingDir: c.Config.WorkingDir, StopSignal: c.Config.StopSignal, ExposedPorts: c.Config.ExposedPorts, Volumes: c.Config.Volumes}
	for k, v := range c.Config.Labels {
		if strings.HasPrefix(k, "io.buildah.") {
			continue
		}
		if out.Config.Labels == nil {
			out.Config.Labels = map[string]string{}
		}
		out.Config.Labels[k] = v
	}
	return out
}

// watchDisk cancels the build when the file system holding dir has lost
// more than limit bytes of free space since the build started (checked
// every two seconds); the returned function stops the watch.
func watchDisk(ctx context.Context, cancel context.CancelCauseFunc, dir string, limit int64) func() {
	free := func() int64 {
		var st syscall.Statfs_t
		if syscall.Statfs(dir, &st) != nil {
			return -1
		}
		return int64(st.Bavail) * st.Bsize
	}
	start := free()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if f := free(); start >= 0 && f >= 0 && start-f > limit {
					cancel(fmt.Errorf("build used more than %d bytes of disk: %w (bounded build; raise --max-disk)", limit, ErrRefused))
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func nonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
