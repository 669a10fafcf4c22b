package manifest_test

import (
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// TestTZIsAZoneNameOfTheDatabase: environment.env.TZ takes the IANA
// database's Area/Location names and the UTC forms, and refuses a
// well-shaped name with no such area, POSIX rules and paths.
func TestTZIsAZoneNameOfTheDatabase(t *testing.T) {
	for _, tz := range []string{"UTC", "GMT", "Etc/UTC", "Etc/GMT+5", "Etc/GMT-14", "Europe/Berlin", "America/Argentina/Buenos_Aires", "America/Port-au-Prince", "America/Indiana/Knox"} {
		if _, err := manifest.Parse(v02(t, nil, map[string]string{"TZ": tz})); err != nil {
			t.Errorf("TZ=%s: %v", tz, err)
		}
	}
	for _, tz := range []string{"Mars/Base", "europe/berlin", "Europe", "EST5EDT,M3.2.0,M11.1.0", "Etc/GMT+15", "Europe/../etc/passwd", "Europe/Berlin/X/Y", ":Europe/Berlin"} {
		_, err := manifest.Parse(v02(t, nil, map[string]string{"TZ": tz}))
		if dotlab.ErrorCode(err) != dotlab.EINVALID || !strings.Contains(problems(err), "$.environment.env.TZ: ") || !strings.Contains(problems(err), "IANA") {
			t.Errorf("TZ=%s: got %q", tz, problems(err))
		}
	}
}
