package manifest

import (
	"fmt"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/unidiff"
)

// MaxPatchBytes bounds the diffs of code.patches in all (each is also at
// most 65,536 characters by the schema): 64 KiB of declared changes is
// room for many one-line fixes and far too little to swap the analysis
// for another (docs/manifest-spec.md "code.patches").
const MaxPatchBytes = 64 << 10

// checkPatches: the diffs together within MaxPatchBytes, and each a unified
// diff that internal/unidiff parses, changing text lines of plain paths in
// the tree only. Whether a patch applies is the runner's to find out (it
// needs the code): spec_issue naming the patch.
func checkPatches(p *dotlab.Problems, patches []dotlab.Patch) {
	total := 0
	for i, pt := range patches {
		at := fmt.Sprintf("$.code.patches[%d]", i)
		total += len(pt.Diff)
		if total > MaxPatchBytes {
			p.Add(at, "the patches reach %d bytes of diff here; at most %d in all: a declared patch is a small change, so publish a larger one as part of the code (a fork at a commit)", total, MaxPatchBytes)
			return
		}
		if _, err := unidiff.Parse(pt.Diff); err != nil {
			p.Add(at+".diff", "%v: give a unified diff as git diff prints it (names with one leading component, a/analysis.R), or diff -u of a top-level file and its saved original (diff -u analysis.R.orig analysis.R)", err)
		}
	}
}

// PatchSummary is one declared patch as a reader sees it (the claim page):
// its reason, diff, the files it changes and its added and removed lines.
type PatchSummary struct {
	Reason, Diff   string
	Files          []string
	Added, Removed int
}

// SummarizePatches describes each of patches (a patch that no longer
// parses is listed with no files).
func SummarizePatches(patches []dotlab.Patch) []PatchSummary {
	out := make([]PatchSummary, 0, len(patches))
	for _, pt := range patches {
		s := PatchSummary{Reason: pt.Reason, Diff: pt.Diff}
		fds, _ := unidiff.Parse(pt.Diff)
		for _, fd := range fds {
			s.Files = append(s.Files, fd.Path)
			s.Added += fd.Added
			s.Removed += fd.Removed
		}
		out = append(out, s)
	}
	return out
}
