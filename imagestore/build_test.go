package imagestore

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestBuildGzipIsDeterministic builds the busybox tree twice with a gzip
// layer, in two stores and from two copies: same digest; the diff_id equals
// the uncompressed build's layer; the image unpacks and its shell runs.
func TestBuildGzipIsDeterministic(t *testing.T) {
	src := testfix.BusyboxRootfs(t)
	opts := BuildOptions{Gzip: true, Env: []string{"LANG=C.UTF-8", "MPLBACKEND=Agg"},
		Labels: map[string]string{PackagesLabel: "busybox-static=1:1.35.0-4+b3\nlibc6=2.36-9"}}
	s1 := openStore(t)
	a, err := s1.BuildWith(src, "test/busybox-gz", opts)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	run(t, "cp", "-a", src+"/.", copyDir)
	s2 := openStore(t)
	b, err := s2.BuildWith(copyDir, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("same tree, gzip, different digests: %s vs %s", a, b)
	}
	plain, err := openStore(t).Build(src, "")
	if err != nil {
		t.Fatal(err)
	}
	if plain == a {
		t.Fatal("gzip and uncompressed builds share a digest")
	}
	img, err := s2.Image(b)
	if err != nil {
		t.Fatal(err)
	}
	l := img.Manifest.Layers[0]
	if l.MediaType != types.OCILayer {
		t.Fatalf("layer media type %s, want %s", l.MediaType, types.OCILayer)
	}
	if l.Digest == img.Config.RootFS.DiffIDs[0] {
		t.Fatal("a gzip layer's digest equals its diff_id")
	}
	// The uncompressed tar is the same: the diff_id is the plain build's layer digest.
	plainImg, err := func() (*Image, error) {
		s := openStore(t)
		d, err := s.Build(src, "")
		if err != nil {
			return nil, err
		}
		return s.Image(d)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.RootFS.DiffIDs[0] != plainImg.Manifest.Layers[0].Digest {
		t.Fatalf("diff_id %s, uncompressed layer %s", img.Config.RootFS.DiffIDs[0], plainImg.Manifest.Layers[0].Digest)
	}
	if got := strings.Join(img.Config.Config.Env, " "); got != DefaultPath+" LANG=C.UTF-8 MPLBACKEND=Agg" {
		t.Fatalf("env %q", got)
	}
	if p := img.Packages(); len(p) != 2 || p[1] != "libc6=2.36-9" {
		t.Fatalf("packages %q", p)
	}
	if p := plainImg.Packages(); p != nil {
		t.Fatalf("plain image packages %q", p)
	}
	if err := s2.Verify(b); err != nil {
		t.Fatal(err)
	}
	rootfs, err := s2.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(rootfs, "bin", "busybox"), "sh", "-c", "echo unpacked && ls /").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "unpacked\n") {
		t.Fatalf("busybox from the unpacked gzip image: %v %q", err, out)
	}
	if os.Geteuid() == 0 {
		out, err := exec.Command("chroot", rootfs, "/bin/sh", "-c", "cat /etc/group && ls -d /tmp /work/out").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "dotlab:x:1000:") || !strings.Contains(string(out), "/work/out") {
			t.Fatalf("chroot into the unpacked gzip image: %v %q", err, out)
		}
	}
}

func TestBuildOptionsRefused(t *testing.T) {
	src := testfix.BusyboxRootfs(t)
	s := openStore(t)
	for _, o := range []BuildOptions{
		{Env: []string{"NOEQUALS"}},
		{Env: []string{"=value"}},
		{Labels: map[string]string{"": "x"}},
	} {
		if _, err := s.BuildWith(src, "", o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	// PATH replaces the default, a repeated key the earlier entry.
	env, err := buildEnv([]string{"PATH=/opt/bin", "A=1", "A=2"})
	if err != nil || strings.Join(env, " ") != "PATH=/opt/bin A=2" {
		t.Fatalf("env %q %v", env, err)
	}
}
