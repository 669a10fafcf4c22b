// Package unidiff parses and applies the unified diffs of a manifest's
// code.patches (docs/manifest-spec.md "code.patches"): text-only changes to
// files of the code tree, applied with zero fuzz. It is deliberately small
// and strict: a diff comes from a stranger's manifest, so every line is
// accounted for (no skipped junk), every number is bounded before it is
// used, and anything the format can say beyond "change these lines of this
// text file" (mode changes, renames, copies, binary patches, symlinks,
// quoted names) is refused with the line that says it.
package unidiff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab/internal/safefs"
)

// MaxLines bounds a hunk's line counts and start positions (and so the
// length of a file a patch may address): no real source file is longer.
const MaxLines = 1 << 22

// ErrRefused marks a diff that says something a declared patch may not
// (a mode change, a rename, a binary hunk, a path outside the tree, …).
var ErrRefused = errors.New("refused")

// FileDiff is the change a diff makes to one file.
type FileDiff struct {
	// Path is the file's clean relative path in the code tree (the diff's
	// names with their first component, "a/" or "b/", stripped).
	Path string
	// Create: the old side is /dev/null (the file must not exist);
	// Delete: the new side is /dev/null (the file must become empty and is removed).
	Create, Delete bool
	Hunks          []Hunk
	// Added and Removed count the hunks' '+' and '-' lines.
	Added, Removed int
}

// Hunk is one "@@ -OldStart,OldLines +NewStart,NewLines @@" block.
type Hunk struct {
	OldStart, OldLines, NewStart, NewLines int
	Lines                                  []Line
}

// Line is one hunk line: Op ' ' (context), '-' or '+', its text without
// the newline, and whether a "\ No newline at end of file" marker follows it.
type Line struct {
	Op    byte
	Text  string
	NoEOL bool
}

// Parse reads a unified diff (git diff, diff -u or diff -ruN output) into
// its files, in order. Outside hunks only these lines may appear: "diff …",
// "index …", "new file mode 100644|100755", "deleted file mode
// 100644|100755", and the "--- OLD" / "+++ NEW" pair (a tab and what
// follows it, diff -u's timestamp, is ignored). Names lose their first
// component (patch -p1) and must then be the same on both sides; names of
// one component (diff -u main.R.orig main.R at the tree's top) name the
// +++ file as they are (bareOld). Errors
// name the line (1-based) and wrap ErrRefused for what a patch may not do.
func Parse(diff string) ([]FileDiff, error) {
	lines := strings.Split(diff, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if err := crlf(lines); err != nil {
		return nil, err
	}
	p := &parser{lines: lines}
	var files []FileDiff
	seen := map[string]bool{}
	for p.i < len(p.lines) {
		fd, err := p.file()
		if err != nil {
			return nil, err
		}
		if seen[fd.Path] {
			return nil, fmt.Errorf("line %d: %s is changed twice in one diff: merge its hunks into one file section", p.i, fd.Path)
		}
		seen[fd.Path] = true
		files = append(files, fd)
	}
	if len(files) == 0 {
		return nil, errors.New("no file changes: a patch is a unified diff with ---/+++ lines and @@ hunks")
	}
	return files, nil
}

// crlf refuses a diff saved with CRLF line ends: its first header line
// ("diff …" or "--- …", which no hunk line precedes) ends in CR. Hunk
// lines may end in CR when the file itself has CRLF ends.
func crlf(lines []string) error {
	for i, l := range lines {
		if strings.HasPrefix(l, "diff ") || strings.HasPrefix(l, "--- ") {
			if strings.HasSuffix(l, "\r") {
				return fmt.Errorf("line %d: %w: the diff has CRLF line ends: save it with LF", i+1, ErrRefused)
			}
			return nil
		}
	}
	return nil
}

type parser struct {
	lines []string
	i     int // the next line, 0-based
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("line %d: "+format, append([]any{p.i + 1}, args...)...)
}

func (p *parser) refusef(format string, args ...any) error {
	return fmt.Errorf("line %d: %w: "+format, append([]any{p.i + 1, ErrRefused}, args...)...)
}

// file reads one file section: headers, the ---/+++ pair and its hunks.
func (p *parser) file() (FileDiff, error) {
	var fd FileDiff
	if err := p.headers(); err != nil {
		return fd, err
	}
	if p.i+1 >= len(p.lines) || !strings.HasPrefix(p.lines[p.i], "--- ") || !strings.HasPrefix(p.lines[p.i+1], "+++ ") {
		return fd, p.errf("expected a \"--- OLD\" line followed by a \"+++ NEW\" line")
	}
	oldName, oldBare, err := p.name(p.lines[p.i][4:])
	if err != nil {
		return fd, err
	}
	p.i++
	newName, newBare, err := p.name(p.lines[p.i][4:])
	if err != nil {
		return fd, err
	}
	if oldName, err = p.bareOld(oldName, oldBare, newName, newBare); err != nil {
		return fd, err
	}
	p.i++
	switch {
	case oldName == "" && newName == "":
		return fd, p.errf("both sides are /dev/null")
	case oldName == "":
		fd.Path, fd.Create = newName, true
	case newName == "":
		fd.Path, fd.Delete = oldName, true
	case oldName != newName:
		return fd, p.refusef("renames %s to %s: a patch may change a file's lines, not its name", oldName, newName)
	default:
		fd.Path = oldName
	}
	for p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], "@@") {
		h, err := p.hunk()
		if err != nil {
			return fd, err
		}
		for _, l := range h.Lines {
			switch l.Op {
			case '+':
				fd.Added++
			case '-':
				fd.Removed++
			}
		}
		fd.Hunks = append(fd.Hunks, h)
	}
	if len(fd.Hunks) == 0 {
		return fd, p.errf("%s has no @@ hunk", fd.Path)
	}
	return fd, nil
}

// headers skips the git and diff header lines before "---", refusing the
// ones that change more than lines.
func (p *parser) headers() error {
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		switch {
		case strings.HasPrefix(l, "--- "):
			return nil
		case strings.HasPrefix(l, "diff "), strings.HasPrefix(l, "index "):
		case l == "new file mode 100644", l == "new file mode 100755", l == "deleted file mode 100644", l == "deleted file mode 100755":
		case strings.HasPrefix(l, "new file mode "), strings.HasPrefix(l, "deleted file mode "):
			return p.refusef("%q: only regular files (mode 100644 or 100755), no symlinks or submodules", l)
		case strings.HasPrefix(l, "old mode "), strings.HasPrefix(l, "new mode "):
			return p.refusef("%q: a patch may not change a file's mode", l)
		case strings.HasPrefix(l, "rename "), strings.HasPrefix(l, "copy "), strings.HasPrefix(l, "similarity index "), strings.HasPrefix(l, "dissimilarity index "):
			return p.refusef("%q: a patch may not rename or copy files", l)
		case strings.HasPrefix(l, "GIT binary patch"), strings.HasPrefix(l, "Binary files "):
			return p.refusef("binary change: a patch may change text lines only")
		default:
			return p.errf("%q is not part of a unified diff (outside a hunk only diff/index/new file mode/deleted file mode and ---/+++ lines may appear)", truncate(l))
		}
	}
	return p.errf("expected a \"--- OLD\" line")
}

// PrefixFix is what to run for a diff whose names this package cannot
// read: the two forms whose names it accepts.
const PrefixFix = "make it with git diff in a checkout, or diff -u a/analysis.R b/analysis.R (names with one leading component), or, for a file at the tree's top, diff -u analysis.R.orig analysis.R"

// name turns a ---/+++ name into a clean tree path ("" for /dev/null).
// bare reports a name of one component (diff -u main.R.orig main.R run
// at the tree's top), which is taken as it is, without stripping.
func (p *parser) name(s string) (path string, bare bool, err error) {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	if s == "/dev/null" {
		return "", false, nil
	}
	if strings.HasPrefix(s, "\"") {
		return "", false, p.refusef("quoted name %s: name files without quotes, tabs or control characters", truncate(s))
	}
	first, rest, ok := strings.Cut(s, "/")
	if !ok {
		rest, bare = s, true
	} else if first == "" || rest == "" {
		return "", false, p.errf("name %q: want a prefix and a path, as in a/analysis.R (the first component is stripped): %s", truncate(s), PrefixFix)
	}
	comps, err := safefs.SplitName(rest, false, "patched file")
	if err != nil || len(comps) == 0 || strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "./") {
		return "", false, p.refusef("name %q: not a plain relative path inside the code tree", truncate(s))
	}
	for _, c := range comps {
		if strings.EqualFold(c, ".git") {
			return "", false, p.refusef("name %q writes into .git", truncate(s))
		}
		if strings.ContainsFunc(c, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return "", false, p.refusef("name %q has a control character", truncate(s))
		}
	}
	return strings.Join(comps, "/"), bare, nil
}

// bareOld reads diff -u's plain names: when the +++ name is one bare
// component (no a/ or b/ prefix), the file patched is the one it names, and
// a bare --- name (the saved original, main.R.orig) is taken to be that
// file's old side. A bare name beside a prefixed one is ambiguous (which
// component to strip) and is an error saying what to run.
func (p *parser) bareOld(oldName string, oldBare bool, newName string, newBare bool) (string, error) {
	switch {
	case oldBare && newBare:
		return newName, nil
	case (oldBare && newName != "") || (newBare && oldName != ""):
		return "", p.errf("names %s and %s: one has a prefix (a/…) and the other none: %s", oldName, newName, PrefixFix)
	}
	return oldName, nil
}

// hunk reads one @@ header and exactly the lines its counts announce.
func (p *parser) hunk() (Hunk, error) {
	var h Hunk
	header := p.lines[p.i]
	rest, ok := strings.CutPrefix(header, "@@ -")
	end := strings.Index(rest, " @@")
	if !ok || end < 0 {
		return h, p.errf("hunk header %q: want \"@@ -START[,COUNT] +START[,COUNT] @@\"", truncate(header))
	}
	oldR, newR, ok := strings.Cut(rest[:end], " +")
	var err1, err2 error
	h.OldStart, h.OldLines, err1 = hunkRange(oldR)
	h.NewStart, h.NewLines, err2 = hunkRange(newR)
	if !ok || err1 != nil || err2 != nil {
		return h, p.errf("hunk header %q: want \"@@ -START[,COUNT] +START[,COUNT] @@\" with counts up to %d", truncate(header), MaxLines)
	}
	if h.OldLines == 0 && h.NewLines == 0 {
		return h, p.errf("hunk header %q announces no lines", truncate(header))
	}
	p.i++
	oldN, newN := 0, 0
	for oldN < h.OldLines || newN < h.NewLines {
		if p.i >= len(p.lines) {
			return h, p.errf("hunk ends early: its header announces %d old and %d new lines, %d and %d are there", h.OldLines, h.NewLines, oldN, newN)
		}
		l := p.lines[p.i]
		op, text := byte(' '), ""
		if l != "" { // an empty line is an empty context line whose space an editor dropped
			op, text = l[0], l[1:]
		}
		switch op {
		case ' ':
			oldN++
			newN++
		case '-':
			oldN++
		case '+':
			newN++
		default:
			return h, p.errf("hunk line %q: want ' ', '-' or '+' first", truncate(l))
		}
		if oldN > h.OldLines || newN > h.NewLines {
			return h, p.errf("hunk has more lines than its header announces (%d old, %d new)", h.OldLines, h.NewLines)
		}
		p.i++
		nl := Line{Op: op, Text: text}
		if p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], "\\ ") {
			nl.NoEOL = true
			p.i++
		}
		h.Lines = append(h.Lines, nl)
	}
	if err := checkMarkers(h); err != nil {
		return h, p.errf("%v", err)
	}
	return h, nil
}

// checkMarkers: a "\ No newline at end of file" marker may only follow
// the hunk's last old-side or last new-side line.
func checkMarkers(h Hunk) error {
	lastOld, lastNew := -1, -1
	for i, l := range h.Lines {
		if l.Op != '+' {
			lastOld = i
		}
		if l.Op != '-' {
			lastNew = i
		}
	}
	for i, l := range h.Lines {
		ok := (l.Op == '-' && i == lastOld) || (l.Op == '+' && i == lastNew) || (l.Op == ' ' && i == lastOld && i == lastNew)
		if l.NoEOL && !ok {
			return fmt.Errorf("a \"\\ No newline at end of file\" marker follows hunk line %d, which is not the last line of its side of the hunk", i+1)
		}
	}
	return nil
}

// hunkRange parses "START[,COUNT]" (COUNT defaults to 1), each at most MaxLines.
func hunkRange(s string) (start, count int, err error) {
	a, b, hasCount := strings.Cut(s, ",")
	if start, err = smallInt(a); err != nil {
		return 0, 0, err
	}
	count = 1
	if hasCount {
		if count, err = smallInt(b); err != nil {
			return 0, 0, err
		}
	}
	return start, count, nil
}

func smallInt(s string) (int, error) {
	if s == "" || len(s) > 8 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a small number")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxLines {
		return 0, errors.New("not a small number")
	}
	return n, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
