package testfix

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Exclusive makes t the only exclusive test running on this machine until
// it ends: it takes an exclusive flock(2) on <temp dir>/dotlab-exclusive-
// tests.lock, waiting for any other test holding it (in this process or in
// another package's test binary; `go test ./...` runs packages at once).
// The tests that measure latency against a bound, or start hundreds of
// processes, take it, so that they neither disturb nor are disturbed by
// each other; everything else runs beside them as usual.
func Exclusive(t testing.TB) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "dotlab-exclusive-tests.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("exclusive test lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("exclusive test lock %s: %v", path, err)
	}
	t.Cleanup(func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	})
}
