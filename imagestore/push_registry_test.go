package imagestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/registrytest"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/runner"
)

// TestPushToAuthRegistryPullAnonymously pushes a store image with basic auth
// (credentials from a Docker config file) to one docker-registry over TLS,
// and pulls it by digest, anonymously, from a second, read-only registry
// over the same storage into an empty store, trusting the test CA through
// runner.Policy.TrustCAFile.
func TestPushToAuthRegistryPullAnonymously(t *testing.T) {
	reg := registrytest.Start(t)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	ctx := context.Background()
	src, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := src.BuildWith(testfix.BusyboxRootfs(t), "lab/busybox", imagestore.BuildOptions{Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	trust := runner.Policy{AllowPrivate: true, TrustCAFile: reg.CAFile}
	push := imagestore.PushOptions{Transport: trust.Transport(), AllowHTTP: true}

	// Without the test CA the registry's certificate is not trusted.
	untrusted := imagestore.PushOptions{Transport: runner.Policy{AllowPrivate: true}.Transport(), AllowHTTP: true}
	if _, err := src.Push(ctx, d, reg.Push+"/lab/busybox", untrusted); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("push without the test CA: %v", err)
	}
	// A tag in the destination is set; the printed reference is by digest.
	pushed, err := src.Push(ctx, d, reg.Push+"/lab/busybox:v1", push)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.String() != reg.Push+"/lab/busybox@"+d.String() {
		t.Fatalf("pushed %s", pushed)
	}
	// Anonymous: the push registry refuses, the read-only one serves.
	if err := imagestore.Pullable(ctx, reg.Push+"/lab/busybox@"+d.String(), imagestore.PullOptions{Transport: trust.Transport(), AllowHTTP: true}); !errors.Is(err, imagestore.ErrNeedsCredentials) || !strings.Contains(err.Error(), "runners pull anonymously") {
		t.Fatalf("the htpasswd registry and an anonymous client: %v", err)
	}
	if _, _, err := emptyStore(t).Resolve(ctx, reg.Push+"/lab/busybox@"+d.String(), imagestore.PullOptions{Transport: trust.Transport(), AllowHTTP: true}); !errors.Is(err, imagestore.ErrNeedsCredentials) {
		t.Fatalf("anonymous pull from the htpasswd registry: %v", err)
	}
	ref := reg.Pull + "/lab/busybox@" + d.String()
	pull := imagestore.PullOptions{Transport: trust.Transport(), AllowHTTP: true}
	if err := imagestore.Pullable(ctx, ref, pull); err != nil {
		t.Fatalf("anonymous HEAD on the read-only registry: %v", err)
	}
	dst, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, pulled, err := dst.Resolve(ctx, ref, pull)
	if err != nil || !pulled || img.Digest != d {
		t.Fatalf("pull by digest into an empty store: pulled=%v err=%v", pulled, err)
	}
	// Pushing without credentials names the fix.
	empty := t.TempDir()
	t.Setenv("DOCKER_CONFIG", empty)
	if _, err := src.Push(ctx, d, reg.Push+"/lab/other", push); err == nil || !strings.Contains(err.Error(), "docker login") ||
		!strings.Contains(err.Error(), "needs credentials") || !strings.Contains(err.Error(), "none found for "+reg.Push+" in "+filepath.Join(empty, "config.json")) {
		t.Fatalf("push without credentials: %v", err)
	}
	// Not pushed: not pullable.
	other, _ := src.BuildWith(testfix.BusyboxRootfs(t), "", imagestore.BuildOptions{Env: []string{"X=1"}})
	if err := imagestore.Pullable(ctx, reg.Pull+"/lab/busybox@"+other.String(), pull); err == nil {
		t.Fatal("an image never pushed was pullable")
	}
}

// emptyStore is a new, empty image store.
func emptyStore(t *testing.T) *imagestore.Store {
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
