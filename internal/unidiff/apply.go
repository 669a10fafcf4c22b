package unidiff

import (
	"bytes"
	"fmt"
	"strings"
)

// Apply returns old changed by fd's hunks with zero fuzz: every hunk must
// start at exactly the line its header names, in ascending order without
// overlap, and every context and removed line must equal the file's line
// byte for byte, including whether the file's last line ends in a newline.
// A new file (fd.Create) starts from empty old. The error names the hunk
// (1-based) and the file line where it stopped matching.
func Apply(old []byte, fd FileDiff) ([]byte, error) {
	lines, noEOL := splitLines(old)
	var out bytes.Buffer
	out.Grow(len(old) + 1024)
	next := 0 // the first old line not yet copied, 0-based
	for k, h := range fd.Hunks {
		start := h.OldStart - 1 // 0-based index of the hunk's first old line
		if h.OldLines == 0 {
			start = h.OldStart // insertion after line OldStart
		}
		switch {
		case start < next:
			return nil, fmt.Errorf("hunk %d (%s): starts at line %d, before the end of the hunk before it: hunks must be in order and not overlap", k+1, hunkHeader(h), h.OldStart)
		case start > len(lines) || start+h.OldLines > len(lines):
			return nil, fmt.Errorf("hunk %d (%s): the file has %d lines", k+1, hunkHeader(h), len(lines))
		}
		for _, l := range lines[next:start] {
			out.WriteString(l)
			out.WriteByte('\n')
		}
		at := start
		for _, l := range h.Lines {
			if l.Op != '+' {
				if err := matchOld(lines, noEOL, at, l); err != nil {
					return nil, fmt.Errorf("hunk %d (%s) does not apply at line %d: %v", k+1, hunkHeader(h), at+1, err)
				}
				at++
			}
			if l.Op != '-' {
				out.WriteString(l.Text)
				if !l.NoEOL {
					out.WriteByte('\n')
				}
			}
		}
		next = at
		if lastNewNoEOL(h) && next != len(lines) {
			return nil, fmt.Errorf("hunk %d (%s): ends its new text without a newline but does not reach the end of the file", k+1, hunkHeader(h))
		}
	}
	for i, l := range lines[next:] {
		out.WriteString(l)
		if next+i < len(lines)-1 || !noEOL {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}

// splitLines splits data into lines without their "\n"; noEOL says the
// last line has none.
func splitLines(data []byte) ([]string, bool) {
	if len(data) == 0 {
		return nil, false
	}
	s := string(data)
	noEOL := !strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n"), noEOL
}

// matchOld checks hunk line l against the file's line at (0-based).
func matchOld(lines []string, noEOL bool, at int, l Line) error {
	if at >= len(lines) {
		return fmt.Errorf("the file ends before the hunk does")
	}
	if lines[at] != l.Text {
		return fmt.Errorf("the file has %q, the patch expects %q", truncate(lines[at]), truncate(l.Text))
	}
	last := at == len(lines)-1
	switch {
	case l.NoEOL && !(last && noEOL):
		return fmt.Errorf("the patch expects this line to end the file without a newline")
	case !l.NoEOL && last && noEOL:
		return fmt.Errorf("the file's last line has no newline; the patch expects one (add \"\\ No newline at end of file\")")
	}
	return nil
}

// lastNewNoEOL reports whether the hunk's last new-side line lacks a newline.
func lastNewNoEOL(h Hunk) bool {
	for i := len(h.Lines) - 1; i >= 0; i-- {
		if h.Lines[i].Op != '-' {
			return h.Lines[i].NoEOL
		}
	}
	return false
}

func hunkHeader(h Hunk) string {
	return fmt.Sprintf("@@ -%d,%d +%d,%d @@", h.OldStart, h.OldLines, h.NewStart, h.NewLines)
}
