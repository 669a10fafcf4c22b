package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ErrUnsafeName marks an archive entry name (or hard-link target) that is
// refused rather than cleaned: a tree that names `..`, an empty component
// or a NUL byte is hostile or broken, and silently clamping it would unpack
// something other than what was published (docs/sandbox.md "Unpacking
// untrusted trees").
var ErrUnsafeName = errors.New("unsafe entry name")

// Bounds on names, as Linux enforces them (PATH_MAX 4096 including the NUL,
// NAME_MAX 255): a longer name cannot be created, so it is refused up front.
const (
	MaxNameBytes      = 4095
	MaxComponentBytes = 255
)

// SplitName checks an entry name from an untrusted tree and returns its
// components. Conventional forms are accepted: leading "/" characters and
// one leading "./" (both mean "from the root"), a trailing "/" when dir is
// set, and the root itself ("", ".", "./", "/"), which gives no components.
// Everything else that is not a plain relative path is refused with an
// error wrapping ErrUnsafeName that names the rule: an empty name, a NUL
// byte, a name over MaxNameBytes or a component over MaxComponentBytes, an
// empty ("//"), "." or ".." component, a trailing "/" on a non-directory.
// what names the thing checked ("name", "hard link target").
func SplitName(name string, dir bool, what string) ([]string, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: empty %s (rule: every entry is named)", ErrUnsafeName, what)
	case strings.IndexByte(name, 0) >= 0:
		return nil, fmt.Errorf("%w: %s contains a NUL byte", ErrUnsafeName, what)
	case len(name) > MaxNameBytes:
		return nil, fmt.Errorf("%w: %s of %d bytes (rule: at most %d)", ErrUnsafeName, what, len(name), MaxNameBytes)
	}
	rest := strings.TrimLeft(name, "/")
	if rest == "." {
		rest = ""
	}
	rest = strings.TrimPrefix(rest, "./")
	if strings.HasSuffix(rest, "/") {
		if !dir {
			return nil, fmt.Errorf("%w: %s %q ends in \"/\" but the entry is not a directory", ErrUnsafeName, what, name)
		}
		rest = strings.TrimSuffix(rest, "/")
	}
	if rest == "" {
		return nil, nil
	}
	comps := strings.Split(rest, "/")
	for _, c := range comps {
		switch {
		case c == "":
			return nil, fmt.Errorf("%w: %s %q has an empty component (\"//\") (rule: components are non-empty)", ErrUnsafeName, what, name)
		case c == "." || c == "..":
			return nil, fmt.Errorf("%w: %s %q has a %q component (rule: no \".\" or \"..\" components after an optional leading \"./\")", ErrUnsafeName, what, name, c)
		case len(c) > MaxComponentBytes:
			return nil, fmt.Errorf("%w: %s %q has a component of %d bytes (rule: at most %d)", ErrUnsafeName, what, name, len(c), MaxComponentBytes)
		}
	}
	return comps, nil
}

// StrictName is SplitName joined back into a clean relative path ("" for
// the root itself).
func StrictName(name string, dir bool) (string, error) {
	comps, err := SplitName(name, dir, "name")
	if err != nil {
		return "", err
	}
	return strings.Join(comps, "/"), nil
}

// FileKind names the file type of m for a refusal or a log line:
// "directory", "regular file", "symlink", "fifo", "socket", "device".
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "non-directory"
}
