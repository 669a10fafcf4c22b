package runner

import (
	"os"
	"strings"

	"github.com/dotlab/dotlab"
)

// checkZone makes a run spec_issue when environment.env.TZ names a zone
// (Area/Location, Etc/…: manifest validation has held it to the IANA
// database's form) that the image's /usr/share/zoneinfo does not hold: the
// C library would silently fall back to UTC and the run would not be the
// one the manifest describes (docs/manifest-spec.md "environment"). The
// lookup stays inside rootfs (os.Root: the image's symlinks are followed
// only within it). The UTC forms without a slash need no file.
func checkZone(log *Log, m *dotlab.Manifest, rootfs string) error {
	tz, ok := m.Environment.Env["TZ"]
	if !ok || !strings.Contains(tz, "/") {
		return nil
	}
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Stat("usr/share/zoneinfo/" + tz)
	if err == nil && fi.Mode().IsRegular() {
		return nil
	}
	log.Error("environment", "environment.env.TZ names a zone the image does not have", map[string]any{"tz": tz})
	return issuef("environment.env.TZ %q: the image has no /usr/share/zoneinfo/%s (install tzdata in the image, or set a zone it holds)", tz, tz)
}
