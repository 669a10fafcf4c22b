package imagestore

import (
	"archive/tar"
	"fmt"
	"strings"

	"github.com/dotlab/dotlab/internal/safefs"
)

// maxNameBytes bounds names and link targets (safefs.MaxNameBytes).
const maxNameBytes = safefs.MaxNameBytes

// Whiteout names (OCI image-spec "Representing Changes"; AUFS convention).
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// ruleError is one broken rule of entry validation; the layer loop wraps it
// with ErrUnsafeImage, the layer digest and the entry name.
type ruleError string

func (r ruleError) Error() string { return string(r) }

func rulef(format string, args ...any) error { return ruleError(fmt.Sprintf(format, args...)) }

// entryKind says what applying a validated entry does.
type entryKind int

const (
	entrySkip     entryKind = iota // the root directory itself, or a PAX global header
	entryPath                      // create or replace path
	entryWhiteout                  // delete path (and, for a directory, all below it)
	entryOpaque                    // delete what lower layers put in the directory path
)

// entryPlan is a validated tar entry: path is clean, relative, and names no
// "..", "." or empty component ("" only for an opaque whiteout at the root).
// For a hard link, link is the validated target in the same form.
type entryPlan struct {
	kind entryKind
	path string
	link string
}

// validateEntry is the one check every layer entry passes before anything is
// applied. It sees the header after archive/tar has merged PAX records
// (path, linkpath) and GNU long names, so those cannot bypass it. It accepts:
//
//   - names with leading "/" characters or one leading "./" (both mean "from
//     the rootfs"), and a trailing "/" on a directory;
//   - the root itself ("", ".", "./", "/") as a directory entry, which is a no-op;
//   - whiteouts ".wh.NAME" and the opaque marker ".wh..wh..opq" as last component;
//   - symbolic links with any target (relative, absolute or with ".."): a
//     link is resolved inside the container, never by the unpacker;
//   - character and block devices and FIFOs, which are validated and then
//     skipped (the runtime provides /dev);
//   - PAX global headers, which are skipped.
//
// It refuses (a ruleError naming the rule) every other form: an empty name,
// NUL bytes, a name longer than 4095 bytes or a component longer than 255,
// an empty, "." or ".." component, a non-directory naming the root or ending
// in "/", a whiteout of an empty name, "." or "..", a whiteout that is a
// directory, other ".wh..wh." names (reserved AUFS metadata), ".wh." in a
// directory component, a symbolic link with an empty, NUL-bearing or
// over-long target, a hard link whose target breaks the name rules or is the
// root or the entry itself, and any entry type other than those above.
func validateEntry(hdr *tar.Header) (entryPlan, error) {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return entryPlan{kind: entrySkip}, nil
	case tar.TypeDir, tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink,
		tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
	default:
		return entryPlan{}, rulef("entry type %q is not supported (rule: directories, regular files, symbolic and hard links, devices and FIFOs only)", hdr.Typeflag)
	}
	isDir := hdr.Typeflag == tar.TypeDir
	comps, err := splitName(hdr.Name, isDir, "name")
	if err != nil {
		return entryPlan{}, err
	}
	if len(comps) == 0 {
		if !isDir {
			return entryPlan{}, rulef("a %s entry names the root directory itself (rule: only a directory entry may name the root)", typeName(hdr.Typeflag))
		}
		return entryPlan{kind: entrySkip}, nil
	}
	for _, c := range comps[:len(comps)-1] {
		if strings.HasPrefix(c, whiteoutPrefix) {
			return entryPlan{}, rulef("directory component %q starts with %q (rule: whiteout names only as the last component)", c, whiteoutPrefix)
		}
	}
	base := comps[len(comps)-1]
	dir := strings.Join(comps[:len(comps)-1], "/")
	if strings.HasPrefix(base, whiteoutPrefix) {
		if isDir {
			return entryPlan{}, rulef("whiteout %q is a directory (rule: a whiteout is a file)", base)
		}
		switch {
		case base == whiteoutOpaque:
			return entryPlan{kind: entryOpaque, path: dir}, nil
		case strings.HasPrefix(base, whiteoutMeta):
			return entryPlan{}, rulef("%q is reserved whiteout metadata (rule: only %q may start with %q)", base, whiteoutOpaque, whiteoutMeta)
		}
		target := strings.TrimPrefix(base, whiteoutPrefix)
		if target == "" || target == "." || target == ".." {
			return entryPlan{}, rulef("whiteout of %q (rule: a whiteout names one existing entry: not empty, \".\" or \"..\")", target)
		}
		return entryPlan{kind: entryWhiteout, path: joinPath(dir, target)}, nil
	}
	plan := entryPlan{kind: entryPath, path: strings.Join(comps, "/")}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		switch {
		case hdr.Linkname == "":
			return entryPlan{}, rulef("symbolic link with an empty target (rule: a link names a target)")
		case strings.IndexByte(hdr.Linkname, 0) >= 0:
			return entryPlan{}, rulef("symbolic link target contains a NUL byte")
		case len(hdr.Linkname) > maxNameBytes:
			return entryPlan{}, rulef("symbolic link target of %d bytes (rule: at most %d)", len(hdr.Linkname), maxNameBytes)
		}
	case tar.TypeLink:
		tc, err := splitName(hdr.Linkname, false, "hard link target")
		if err != nil {
			return entryPlan{}, err
		}
		if len(tc) == 0 {
			return entryPlan{}, rulef("hard link to the root directory (rule: a hard link names a file inside the rootfs)")
		}
		plan.link = strings.Join(tc, "/")
		if plan.link == plan.path {
			return entryPlan{}, rulef("hard link to itself")
		}
	}
	return plan, nil
}

// splitName is safefs.SplitName (the one name rule for image layers, code
// archives and OCI archives), its refusal as a ruleError.
func splitName(name string, dir bool, what string) ([]string, error) {
	comps, err := safefs.SplitName(name, dir, what)
	if err != nil {
		return nil, ruleError(strings.TrimPrefix(err.Error(), safefs.ErrUnsafeName.Error()+": "))
	}
	return comps, nil
}

func joinPath(dir, base string) string {
	if dir == "" {
		return base
	}
	return dir + "/" + base
}

// rootName is p as an os.Root name ("." for the root).
func rootName(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func typeName(t byte) string {
	switch t {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		return "regular file"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("type %q", t)
}

// quoteName quotes an entry name for an error message, cut to 200 bytes.
func quoteName(name string) string {
	if len(name) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", name[:200], len(name))
	}
	return fmt.Sprintf("%q", name)
}
