package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRuntime writes an executable at dir/runc printing `runc version V`
// and appending a line to dir/calls on every run, so a test can count the
// probes.
func fakeRuntime(t *testing.T, dir, version string) string {
	t.Helper()
	bin := filepath.Join(dir, "runc")
	script := "#!/bin/sh\necho x >> " + filepath.Join(dir, "calls") + "\necho 'runc version " + version + "'\necho 'spec: 1.0.2-dev'\n"
	if err := os.WriteFile(bin+".new", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil { // a new inode, as a package upgrade makes
		t.Fatal(err)
	}
	return bin
}

func probes(t *testing.T, dir string) int {
	data, _ := os.ReadFile(filepath.Join(dir, "calls"))
	return strings.Count(string(data), "x")
}

// TestVersionCacheAcrossProcesses: a CheckVersion result is kept in
// Runtime.VersionCache and reused by a fresh Runtime value (what the next
// `dotlab rerun` process makes) without running the binary; a replaced
// binary, a cache file others may write, and a cache naming a build the rule
// refuses are each probed or refused as without the cache.
func TestVersionCacheAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "runtime-version.json")
	bin := fakeRuntime(t, dir, "1.2.8")
	ctx := context.Background()
	first := Runtime{Binary: bin, VersionCache: cache}
	v1, err := first.CheckVersion(ctx)
	if err != nil || v1.Version != "1.2.8" || probes(t, dir) != 1 {
		t.Fatalf("first check: %+v %v, %d probes", v1, err, probes(t, dir))
	}
	next := Runtime{Binary: bin, VersionCache: cache}
	v2, err := next.CheckVersion(ctx)
	if err != nil || probes(t, dir) != 1 {
		t.Fatalf("second process probed again (%d probes) or failed: %v", probes(t, dir), err)
	}
	if b1, _ := json.Marshal(v1); string(b1) != mustJSON(t, v2) {
		t.Fatalf("cached version %s, probed %s", mustJSON(t, v2), b1)
	}

	// A cache others could have written is not trusted.
	os.Chmod(cache, 0o666)
	if _, err := (&Runtime{Binary: bin, VersionCache: cache}).CheckVersion(ctx); err != nil || probes(t, dir) != 2 {
		t.Fatalf("group-writable cache trusted: %d probes, %v", probes(t, dir), err)
	}
	os.Chmod(cache, 0o600)

	// The binary replaced by a build without the fix: probed again, refused.
	time.Sleep(10 * time.Millisecond)
	fakeRuntime(t, dir, "1.1.5")
	_, err = (&Runtime{Binary: bin, VersionCache: cache}).CheckVersion(ctx)
	if !errors.Is(err, ErrRuntimeRefused) || probes(t, dir) != 3 {
		t.Fatalf("replaced binary: %d probes, %v; want a new probe and a refusal", probes(t, dir), err)
	}

	// A cache edited to name a refused build for the current binary: the
	// rule still applies to what is read back.
	id, err := binaryIdentity(bin)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(versionCacheFile{Binary: id, Version: RuntimeVersion{Name: "runc", Version: "1.1.5"}})
	os.WriteFile(cache, forged, 0o600)
	_, err = (&Runtime{Binary: bin, VersionCache: cache}).CheckVersion(ctx)
	if !errors.Is(err, ErrRuntimeRefused) || probes(t, dir) != 3 {
		t.Fatalf("cached refused build: %d probes, %v; want the rule's refusal without a probe", probes(t, dir), err)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
