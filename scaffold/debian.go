package scaffold

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/internal/lazyre"
)

// What a package needs from its image, by kind: a Python module (the first
// part of an import's dotted name), an R package, a command.
const (
	NeedPython  = "python module"
	NeedR       = "R package"
	NeedCommand = "command"
)

// need is one module, package or command.
type need struct{ kind, name string }

// debIndex says which Debian packages ship each need: owners ship its own
// file (x/__init__.py, x.py, x.*.so; x/DESCRIPTION; usr/bin/x), parts ship
// files below a Python module's directory (a namespace package).
type debIndex struct {
	owners map[need][]string
	parts  map[need][]string
}

func newDebIndex() *debIndex {
	return &debIndex{owners: map[need][]string{}, parts: map[need][]string{}}
}

const distPackages = "usr/lib/python3/dist-packages/"

var identifier = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// needOf reads a file path of a Debian package (no leading slash): the
// need it ships and whether it is the need's own file.
func needOf(p string) (need, bool, bool) {
	switch {
	case strings.HasPrefix(p, distPackages):
		first, rest, _ := strings.Cut(p[len(distPackages):], "/")
		if rest == "" {
			mod, _, _ := strings.Cut(first, ".")
			ext := path.Ext(first)
			ok := (ext == ".py" || ext == ".so") && identifier().MatchString(mod)
			return need{NeedPython, mod}, true, ok
		}
		return need{NeedPython, first}, rest == "__init__.py", identifier().MatchString(first)
	case strings.HasPrefix(p, "usr/lib/R/site-library/") || strings.HasPrefix(p, "usr/lib/R/library/"):
		parts := strings.Split(p, "/")
		return need{NeedR, parts[4]}, true, len(parts) == 6 && parts[5] == "DESCRIPTION"
	case strings.HasPrefix(p, "usr/bin/") || strings.HasPrefix(p, "bin/"):
		cmd := path.Base(p)
		return need{NeedCommand, cmd}, true, path.Dir(p) == "usr/bin" || path.Dir(p) == "bin"
	}
	return need{}, false, false
}

// add records that pkg ships the file p.
func (ix *debIndex) add(p, pkg string) {
	n, own, ok := needOf(strings.TrimPrefix(p, "/"))
	if !ok {
		return
	}
	m := ix.parts
	if own {
		m = ix.owners
	}
	for _, have := range m[n] {
		if have == pkg {
			return
		}
	}
	m[n] = append(m[n], pkg)
}

// lookup is the package that ships n (the first of several, in name
// order), and whether any does.
func (ix *debIndex) lookup(n need) (string, bool) {
	for _, m := range []map[need][]string{ix.owners, ix.parts} {
		if pkgs := m[n]; len(pkgs) > 0 {
			s := append([]string(nil), pkgs...)
			sort.Strings(s)
			return s[0], true
		}
	}
	return "", false
}

// Bounds of an image's dpkg file lists.
const (
	maxDpkgLists     = 20000
	maxDpkgListBytes = 512 << 20
)

// imageIndex reads /var/lib/dpkg/info/*.list in an image's rootfs,
// through an os.Root: no link in the image leads the read out of it.
func imageIndex(rootfs string) (*debIndex, error) {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	dir, err := root.Open("var/lib/dpkg/info")
	if err != nil {
		return nil, fmt.Errorf("the image has no dpkg database (var/lib/dpkg/info): %w", err)
	}
	names, err := dir.Readdirnames(maxDpkgLists + 1)
	dir.Close()
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(names) > maxDpkgLists {
		return nil, fmt.Errorf("the image's dpkg database lists more than %d files", maxDpkgLists)
	}
	ix := newDebIndex()
	var total int64
	for _, name := range names {
		if !strings.HasSuffix(name, ".list") {
			continue
		}
		pkg, _, _ := strings.Cut(strings.TrimSuffix(name, ".list"), ":")
		n, err := readLines(root, "var/lib/dpkg/info/"+name, maxDpkgListBytes-total, func(line string) { ix.add(line, pkg) })
		if err != nil {
			return nil, err
		}
		total += n
	}
	return ix, nil
}

// readLines calls fn for each line of the regular file rel under root,
// reading at most limit bytes (more is an error); it returns the bytes read.
func readLines(root *os.Root, rel string, limit int64, fn func(string)) (int64, error) {
	f, err := root.Open(rel)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", rel)
	}
	lr := &io.LimitedReader{R: f, N: limit + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		fn(sc.Text())
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", rel, err)
	}
	if lr.N <= 0 {
		return 0, fmt.Errorf("%s: over %d MiB of file lists", rel, limit>>20)
	}
	return limit + 1 - lr.N, nil
}

// readOSRelease is VERSION_CODENAME in the rootfs' etc/os-release ("" when
// absent or not a codename, debianCodename: the image's text never enters
// a mirror URL unchecked).
func readOSRelease(rootfs string) string {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return ""
	}
	defer root.Close()
	codename := ""
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		readLines(root, p, 64<<10, func(l string) {
			if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok && codename == "" {
				codename = strings.Trim(v, `"'`)
			}
		})
	}
	if !debianCodename().MatchString(codename) {
		return ""
	}
	return codename
}
