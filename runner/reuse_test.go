package runner_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	"golang.org/x/sys/unix"
)

// datasetCacheHit is the cache_hit of the dataset step of a rerun's log.
func datasetCacheHit(t *testing.T, out string) bool {
	t.Helper()
	for _, e := range readLogs(t, out) {
		if e.Step == "inputs" {
			hit, ok := e.Data["cache_hit"].(bool)
			if !ok {
				t.Fatalf("inputs entry without cache_hit: %v", e.Data)
			}
			return hit
		}
	}
	t.Fatal("no inputs entry in the log")
	return false
}

// blobInode is the inode of a cached blob, which must be 0440 to the sandbox's group.
func blobInode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o440 || st.Gid != sandbox.GID {
		t.Fatalf("cached blob is %v, gid %d; want 0440, gid %d", fi.Mode(), st.Gid, sandbox.GID)
	}
	return st.Ino
}

// TestCachedBlobReuse: a dataset the cache already holds (stored in this
// boot) is downloaded and hashed again on every rerun but not written again:
// the cached blob stands for it once the hash matched. Altered bytes still
// give input_mismatch and leave the cached blob as it was; a blob stamped by
// another boot (a crash may have left it partial) or of the wrong size is
// never used, and is stored anew.
func TestCachedBlobReuse(t *testing.T) {
	f := newFixture(t)
	serve := f.data
	url, hits := dataServer(t, f.data, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Content-Length", fmt.Sprint(len(serve)))
		w.Write(serve)
	})
	r := f.fresh(t, runner.LocalPolicy("/"))
	m := f.manifest(url, meanScript)
	blob := r.Cache.Path(f.dataSH)

	_, out := mustRerun(t, r, m, dotlab.OutcomeReproduced)
	if datasetCacheHit(t, out) {
		t.Fatal("first download reported as a cache hit")
	}
	ino := blobInode(t, blob)

	_, out = mustRerun(t, r, m, dotlab.OutcomeReproduced)
	if !datasetCacheHit(t, out) || blobInode(t, blob) != ino || hits.Load() != 2 {
		t.Fatalf("second rerun: cache_hit %v, inode %d (was %d), %d requests (want a hit on the same blob after 2 requests)",
			datasetCacheHit(t, out), blobInode(t, blob), ino, hits.Load())
	}

	t.Run("altered bytes are a mismatch, the cached blob stays", func(t *testing.T) {
		serve = append([]byte(nil), f.data...)
		serve[3] ^= 0x01
		defer func() { serve = f.data }()
		sum := sha256.Sum256(serve)
		_, out := mustRerun(t, r, m, dotlab.OutcomeInputMismatch, hex.EncodeToString(sum[:]))
		if n := steps(readLogs(t, out)); n["execute"] != 0 {
			t.Fatalf("executed after a mismatch: %v", n)
		}
		if got, _ := os.ReadFile(blob); !bytes.Equal(got, f.data) || blobInode(t, blob) != ino {
			t.Fatalf("cached blob changed by a mismatching download: %q", got)
		}
	})

	// corrupt rewrites the cached blob as a crash could leave it: content
	// and the boot stamp given.
	corrupt := func(t *testing.T, content []byte, boot string) {
		t.Helper()
		if err := os.Chmod(blob, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(blob, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(blob, "user.dotlab.boot", []byte(boot), 0); err != nil {
			t.Fatal(err)
		}
	}
	current := make([]byte, 64)
	n, err := unix.Getxattr(blob, "user.dotlab.boot", current)
	if err != nil {
		t.Fatalf("the stored blob has no boot stamp: %v", err)
	}
	for _, c := range []struct {
		name    string
		content []byte
		boot    string
	}{
		{"stored in another boot", bytes.Repeat([]byte{'0'}, len(f.data)), "00000000-0000-0000-0000-000000000000"},
		{"wrong size", f.data[:4], string(current[:n])},
	} {
		t.Run(c.name, func(t *testing.T) {
			corrupt(t, c.content, c.boot)
			_, out := mustRerun(t, r, m, dotlab.OutcomeReproduced)
			if datasetCacheHit(t, out) {
				t.Fatal("a blob that may be partial was reused")
			}
			if got, _ := os.ReadFile(blob); !bytes.Equal(got, f.data) {
				t.Fatalf("the blob was not stored anew: %q", got)
			}
			blobInode(t, blob)
			_, out = mustRerun(t, r, m, dotlab.OutcomeReproduced)
			if !datasetCacheHit(t, out) {
				t.Fatal("the blob stored anew is not reused")
			}
		})
	}
}
