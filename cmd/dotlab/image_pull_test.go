package main

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
	"github.com/dotlab/dotlab/runner"
)

// TestImagePullPrintsNameAtDigest: image pull's last line is
// DIGEST<TAB>NAME@DIGEST, as image build's and push's are; whether it was
// pulled goes to stderr.
func TestImagePullPrintsNameAtDigest(t *testing.T) {
	cache := t.TempDir()
	s, err := runner.OpenImageStore(cache)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.BuildWith(testfix.BusyboxRootfs(t), "lab/busybox", imagestore.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := "lab/busybox@" + d.String()
	out, errOut, code := runCLI(t, "image", "pull", ref, "--cache", cache)
	if code != 0 || out != d.String()+"\t"+ref+"\n" || !strings.Contains(errOut, "already in the local store") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
}
