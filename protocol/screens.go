package protocol

import (
	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/netpolicy"
)

// textLimits bound, in bytes, the public text fields the steps screen:
// the protocol's own limits where it has one (notes), else generous
// bounds no honest client reaches. They are checked for every field
// before any is screened: the screen costs seconds for 1 MiB, a length
// check nothing (docs/threat-model.md "The public edge": cheap checks
// first).
var textLimits = map[string]int{
	"$.notes":    dotlab.MaxNotes,
	"$.reason":   2000,
	"$.field":    200,
	"$.name":     256,
	"$.operator": 800,
	"$.manifest": 256 << 10,
}

// CheckTextSizes refuses the first field (path → text, in path order)
// over its textLimits bound: EINVALID naming the field, its size and the
// bound.
func CheckTextSizes(fields map[string]string) error {
	for _, path := range dotlab.SortedKeys(fields) {
		if max, ok := textLimits[path]; ok && len(fields[path]) > max {
			return dotlab.Errorf(dotlab.EINVALID, "%s: is %d bytes; at most %d", path, len(fields[path]), max)
		}
	}
	return nil
}

// screenText rejects public text fields (path → text) that look like keys
// or tokens (Config.Leaks), in path order; a field over its textLimits
// bound is refused first, unscreened.
func (s *Service) screenText(fields map[string]string) error {
	if err := CheckTextSizes(fields); err != nil {
		return err
	}
	if s.leaks == nil {
		return nil
	}
	for _, path := range dotlab.SortedKeys(fields) {
		if text := fields[path]; text != "" {
			if err := s.leaks.Check(path, text); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLogsURI holds a run's or challenge's logs_uri, when given, to the
// server's URL rules (docs/protocol.md §6): an https:// URL with a host
// that is not a loopback, private, link-local or metadata address literal
// nor a localhost name, without credentials (internal/netpolicy, the rules
// of a listing). With Config.AllowPrivateURLs plain http:// and loopback
// or private hosts pass too; link-local and metadata addresses never do.
// Errors: EINVALID at $.logs_uri.
func (s *Service) checkLogsURI(uri string) error {
	if uri == "" {
		return nil
	}
	u, err := netpolicy.Rules{AllowPrivate: s.private}.URL("$.logs_uri", uri)
	if err != nil {
		return dotlab.Errorf(dotlab.EINVALID, "%v", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return dotlab.Errorf(dotlab.EINVALID, "$.logs_uri: must be an https:// URL of your full logs")
	}
	return nil
}

// screenRun screens what a run or challenge body makes public: its notes
// and its logs_uri.
func (s *Service) screenRun(b *dotlab.RunBody) error {
	if err := s.screenText(map[string]string{"$.notes": b.Notes}); err != nil {
		return err
	}
	return s.checkLogsURI(b.LogsURI)
}
