package inputarchive_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dotlab/dotlab/inputarchive"
)

// TestAdvStaleTempFilesSwept (adversarial review): a blob being written
// when the server is killed stays in DIR/tmp forever (never served, but
// never freed either: a client can cut uploads and a crash loop fill the
// disk). Opening the archive sweeps temp files older than any upload may
// last, and keeps a fresh one (another server on the same directory may
// be writing it).
func TestAdvStaleTempFilesSwept(t *testing.T) {
	dir := t.TempDir()
	d, err := inputarchive.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		w, err := d.NewWriter(ctx, "sha256/"+"00000000000000000000000000000000000000000000000000000000000000ff")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("half a blob")) // then the server dies: no Commit, no Abort
	}
	left, _ := filepath.Glob(filepath.Join(dir, "tmp", "*"))
	if len(left) != 2 {
		t.Fatalf("temp files: %v", left)
	}
	old := time.Now().Add(-inputarchive.MaxPutTime - time.Minute)
	os.Chtimes(left[0], old, old)
	if _, err := inputarchive.OpenDir(dir); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "tmp", "*"))
	if len(after) != 1 || after[0] != left[1] {
		t.Fatalf("after reopening, temp files %v (want only the fresh %s)", after, left[1])
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "sha256", "*")); len(got) != 0 {
		t.Fatalf("a half-written blob is visible: %v", got)
	}
}
