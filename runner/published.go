package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dotlab/dotlab"
)

// helpers fetches and checks every helper file like a dataset (same
// fetcher, policy and cache), recording each hash as "helper:<name>" in
// the run's input hashes. A mismatch is spec_issue: the server accepts
// input_mismatch for datasets only, as for a code archive.
func (r *Runner) helpers(ctx context.Context, log *Log, f *fetcher, m *dotlab.Manifest, fs *facts) ([]placed, error) {
	var files []placed
	var mismatches []string
	for i, h := range m.Helpers {
		what := fmt.Sprintf("helpers[%d] (%s)", i, h.Name)
		start := r.Clock.Now()
		got, err := f.fetch(ctx, what, h.URL, h.SHA256)
		if err != nil {
			if unfetchable(err) {
				log.Error("inputs", "helper "+h.Name+" cannot be fetched", map[string]any{"name": h.Name, "url": redactURL(h.URL), "error": errText(err)})
				return nil, issuef("helper %s cannot be fetched as written: %v", h.Name, err)
			}
			return nil, err
		}
		fs.inputs[dotlab.HelperInputKey(h.Name)] = got.SHA256
		data := map[string]any{"helper": h.Name, "url": redactURL(h.URL), "expected": h.SHA256, "actual": got.SHA256,
			"bytes": got.Bytes, "cache_hit": got.CacheHit, "seconds": r.since(start)}
		if got.SHA256 != h.SHA256 {
			log.Error("inputs", "hash mismatch for helper "+h.Name, data)
			mismatches = append(mismatches, fmt.Sprintf("helper %s: expected sha256 %s, got %s", h.Name, h.SHA256, got.SHA256))
			continue
		}
		log.Info("inputs", "helper "+h.Name+" hash verified", data)
		files = append(files, placed{h.Name, h.HelperPath(), got.Path})
	}
	if len(mismatches) > 0 {
		return nil, issuef("helper hash mismatch, nothing was executed: %s", strings.Join(mismatches, "; "))
	}
	return files, nil
}

// unpackArchive extracts the verified code archive into codeDir (which
// must not exist yet) through a directory of its own, stripping a single
// top-level folder (GitHub's and Zenodo's "repo-<sha>/") unless the
// manifest says strip_top_folder: false. It returns the stripped folder's
// name, or "".
func unpackArchive(a *dotlab.Archive, blob, codeDir, scratch string) (string, error) {
	tmp, err := os.MkdirTemp(scratch, "archive-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := extractArchive(blob, tmp, CodeLimits()); err != nil {
		return "", issuef("code.archive cannot be unpacked: %v", err)
	}
	src, top := tmp, ""
	if entries, err := os.ReadDir(tmp); err == nil && len(entries) == 1 && a.StripTop() {
		if fi, err := os.Lstat(filepath.Join(tmp, entries[0].Name())); err == nil && fi.IsDir() {
			top = entries[0].Name()
			src = filepath.Join(tmp, top)
		}
	}
	if err := os.Rename(src, codeDir); err != nil {
		return "", err
	}
	return top, os.Chmod(codeDir, 0o755)
}

// Bounds of the failure note's stderr quote (docs/sandbox.md "Outcomes
// from execution").
const (
	noteStderrLines = 5
	noteStderrBytes = 1024
	noteLineBytes   = 300
)

// stderrTrailers are lines that end an interpreter's error output without
// saying what went wrong; they are left out of the quote.
var stderrTrailers = map[string]bool{"Execution halted": true}

// lastLines quotes the last noteStderrLines non-empty lines of stderr,
// skipping trailers such as R's "Execution halted", each cut to
// noteLineBytes and all to noteStderrBytes, joined by " | ".
func lastLines(stderr string) string {
	var picked []string
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0 && len(picked) < noteStderrLines; i-- {
		l := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		if l == "" || stderrTrailers[l] {
			continue
		}
		if len(l) > noteLineBytes {
			l = cutRunes(l, noteLineBytes) + "…"
		}
		picked = append(picked, l)
	}
	if len(picked) == 0 {
		return "(empty)"
	}
	for i, j := 0, len(picked)-1; i < j; i, j = i+1, j-1 {
		picked[i], picked[j] = picked[j], picked[i]
	}
	q := strings.Join(picked, " | ")
	for len(q) > noteStderrBytes && len(picked) > 1 {
		picked = picked[1:]
		q = "… | " + strings.Join(picked, " | ")
	}
	return q
}

// cutRunes cuts s to at most n bytes at a rune boundary.
func cutRunes(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
