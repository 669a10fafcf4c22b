package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// TestImageBuildGzipAndShow: --gzip, --env and --label reach the config, the
// build is deterministic, and image show prints the package list.
func TestImageBuildGzipAndShow(t *testing.T) {
	rootfs := testfix.BusyboxRootfs(t)
	args := func(cache string) []string {
		return []string{"image", "build", rootfs, "--ref", "localhost/test/bb-gz", "--cache", cache, "--gzip",
			"--env", "MPLBACKEND=Agg", "--label", "org.dotlab.packages=busybox=1.35\nlibc6=2.36", "--label", "org.example.k=a,b"}
	}
	cache := t.TempDir()
	out, errOut, code := runCLI(t, args(cache)...)
	if code != 0 {
		t.Fatalf("image build --gzip: %d %s", code, errOut)
	}
	again, _, _ := runCLI(t, args(t.TempDir())...)
	if again != out {
		t.Fatalf("gzip build is not deterministic: %s vs %s", again, out)
	}
	fields := strings.Fields(out)
	ref := fields[len(fields)-1]
	js, errOut, code := runCLI(t, "image", "show", ref, "--json", "--cache", cache)
	if code != 0 {
		t.Fatalf("image show: %d %s", code, errOut)
	}
	var info imagestore.Info
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		t.Fatal(err)
	}
	if info.Digest != fields[0] || len(info.Refs) != 1 || info.Refs[0] != "localhost/test/bb-gz" ||
		len(info.Layers) != 1 || info.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" ||
		strings.Join(info.Packages, " ") != "busybox=1.35 libc6=2.36" || info.Labels["org.example.k"] != "a,b" ||
		len(info.Env) != 2 || info.Env[1] != "MPLBACKEND=Agg" || info.CompressedSize != info.Layers[0].Size {
		t.Fatalf("image show --json: %s", js)
	}
	text, _, code := runCLI(t, "image", "show", fields[0], "--cache", cache)
	if code != 0 || !strings.Contains(text, "package\tlibc6=2.36\n") || !strings.Contains(text, "label\torg.example.k=a,b\n") {
		t.Fatalf("image show: %d %s", code, text)
	}
	if _, errOut, code := runCLI(t, "image", "build", rootfs, "--ref", "x", "--cache", cache, "--label", "nokey"); code == 0 {
		t.Fatalf("--label without = accepted: %s", errOut)
	}
}
