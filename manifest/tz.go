package manifest

import "github.com/dotlab/dotlab/internal/lazyre"

// tzName is the form of environment.env.TZ (docs/manifest-spec.md
// "environment"): a zone name of the IANA time zone database, either
// Area/Location[/Sublocation] with one of the database's areas (Africa,
// America, Antarctica, Arctic, Asia, Atlantic, Australia, Europe, Indian,
// Pacific) and a location spelled as the database spells it (capitalised,
// letters, digits, _ + -), or a UTC form: UTC, GMT, UTC±N, Etc/UTC,
// Etc/GMT±N (N 0–14). Anything else ("Mars/Base", "../x", a POSIX rule)
// is refused at validation; whether the image holds the zone is checked at
// run time (a spec_issue naming environment.env.TZ).
var tzName = envVar{
	lazyre.New(`^(Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific)/[A-Z][A-Za-z0-9_+-]{0,40}(/[A-Z][A-Za-z0-9_+-]{0,40})?$` +
		`|^(UTC|GMT)([+-]([0-9]|1[0-4]))?$|^Etc/(UTC|UCT|Universal|Zulu|Greenwich|GMT([+-]([0-9]|1[0-4]))?)$`),
	"a zone name of the IANA database: Area/Location (Europe/Berlin, America/Argentina/Buenos_Aires), UTC, or Etc/GMT±N",
	nil,
}
