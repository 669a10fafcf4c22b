package manifest

import (
	"fmt"

	"github.com/dotlab/dotlab"
)

// checkDownloads applies the rules of spec v0.2 "downloads"
// (docs/manifest-spec.md "downloads") that the schema cannot express: each
// name is unique among the datasets, helpers and downloads; each URL is an
// http:// or https:// URL without credentials or fragment
// (dotlab.DownloadURLKey); and no two downloads have the same URL once
// compared as the sandbox's responder compares requests (the responder
// answers one URL with one file). The fetch rules (https only, no private
// address) are CheckListing's and the runner's, as for datasets.
func checkDownloads(p *dotlab.Problems, m *dotlab.Manifest) {
	taken := map[string]string{}
	for i, d := range m.Datasets {
		taken[d.Name] = fmt.Sprintf("$.datasets[%d]", i)
	}
	for i, h := range m.Helpers {
		if _, ok := taken[h.Name]; !ok {
			taken[h.Name] = fmt.Sprintf("$.helpers[%d]", i)
		}
	}
	urls := map[string]int{}
	for i, d := range m.Downloads {
		at := fmt.Sprintf("$.downloads[%d]", i)
		if other, dup := taken[d.Name]; dup {
			p.Add(at+".name", "duplicate name %q (also %s): a download's name must be unique among datasets, helpers and downloads", d.Name, other)
		} else {
			taken[d.Name] = at
		}
		key, err := dotlab.DownloadURLKey(d.URL)
		if err != nil {
			p.Add(at+".url", "%v", err)
			continue
		}
		if j, dup := urls[key]; dup {
			p.Add(at+".url", "the same URL as $.downloads[%d].url: pin each URL once", j)
			continue
		}
		urls[key] = i
	}
}
