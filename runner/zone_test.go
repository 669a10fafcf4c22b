package runner

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
)

// TestCheckZoneNeedsTheImagesZoneFile: a TZ the image's zoneinfo holds
// (also through a symlink inside the image) passes; one it lacks, or whose
// symlink leaves the image, is a spec_issue naming environment.env.TZ; UTC
// needs no file.
func TestCheckZoneNeedsTheImagesZoneFile(t *testing.T) {
	rootfs := t.TempDir()
	zi := filepath.Join(rootfs, "usr/share/zoneinfo")
	os.MkdirAll(filepath.Join(zi, "Europe"), 0o755)
	os.MkdirAll(filepath.Join(zi, "posix/Asia"), 0o755)
	os.WriteFile(filepath.Join(zi, "Europe/Berlin"), []byte("TZif"), 0o644)
	os.WriteFile(filepath.Join(zi, "posix/Asia/Tokyo"), []byte("TZif"), 0o644)
	os.MkdirAll(filepath.Join(zi, "Asia"), 0o755)
	os.Symlink("../posix/Asia/Tokyo", filepath.Join(zi, "Asia/Tokyo"))
	outside := filepath.Join(t.TempDir(), "Lima")
	os.WriteFile(outside, []byte("TZif"), 0o644)
	os.MkdirAll(filepath.Join(zi, "America"), 0o755)
	os.Symlink(outside, filepath.Join(zi, "America/Lima"))
	log := NewLog(io.Discard, dotlab.SystemClock{}, nil)
	run := func(tz string) error {
		return checkZone(log, &dotlab.Manifest{Environment: dotlab.Environment{Env: map[string]string{"TZ": tz}}}, rootfs)
	}
	for _, tz := range []string{"Europe/Berlin", "Asia/Tokyo", "UTC"} {
		if err := run(tz); err != nil {
			t.Errorf("TZ=%s: %v", tz, err)
		}
	}
	for _, tz := range []string{"Europe/Paris", "America/Lima"} {
		err := run(tz)
		var si *specIssue
		if !errors.As(err, &si) || !strings.Contains(si.note, "environment.env.TZ") {
			t.Errorf("TZ=%s: %v, want a spec_issue naming environment.env.TZ", tz, err)
		}
	}
}
