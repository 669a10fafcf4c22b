package scaffold

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/runner"
)

// How a need stands against the image.
const (
	NeedInImage   = "in the image"
	NeedDeclared  = "in apt.txt"
	NeedMissing   = "missing"
	NeedUnchecked = "unchecked" // no image to check it against
)

// Need is a module, R package or command the code needs: Where is the first
// place it is named, Package the Debian package that ships it (from the
// image's own file lists, or the archive's Contents index; "" when none
// does or the index was not read), Status one of the Need* constants.
type Need struct {
	Kind, Name, Where, Package, Status string
}

func (n Need) String() string {
	return fmt.Sprintf("%s %s (%s)", n.Kind, n.Name, n.Where)
}

// imageFacts is what init knows of the chosen image.
type imageFacts struct {
	index *debIndex // nil: the image's file lists were not read
	// label are the packages its PackagesLabel names, when its file lists
	// could not be read: a need is in the image when the archive's package
	// for it is one of them.
	label map[string]bool
	suite string // its Debian release, from etc/os-release
	arch  string
}

// chosenImage reads the file lists of --image from the local store
// (never pulled: init does not fetch images). Why it cannot is a note.
func (b *builder) chosenImage() imageFacts {
	facts := imageFacts{arch: debianArch("")}
	if b.opts.Image == "" || b.opts.CacheDir == "" {
		return facts
	}
	fail := func(err error) imageFacts {
		b.warn("$.environment.image", "its packages were not read (%v): what the code needs is checked against the Debian archive only", err)
		return facts
	}
	store, err := runner.OpenImageStore(b.opts.CacheDir)
	if err != nil {
		return fail(err)
	}
	ref, err := imagestore.ParseRef(b.opts.Image)
	if err != nil {
		return fail(err)
	}
	h, _ := imagestore.ParseDigest(ref.DigestStr())
	img, err := store.Image(h)
	if errors.Is(err, imagestore.ErrNotFound) {
		return fail(fmt.Errorf("not in this machine's store %s: dotlab image pull it first", store.Dir()))
	} else if err != nil {
		return fail(err)
	}
	if img.Config != nil && img.Config.Architecture != "" {
		facts.arch = debianArch(img.Config.Architecture)
	}
	rootfs, err := store.Rootfs(img, nil)
	if err == nil {
		facts.index, err = imageIndex(rootfs)
		facts.suite = readOSRelease(rootfs)
	}
	if err != nil {
		pkgs := img.Packages()
		if len(pkgs) == 0 {
			return fail(err)
		}
		facts.index, facts.label = nil, map[string]bool{}
		for _, p := range pkgs {
			name, _, _ := strings.Cut(p, "=")
			facts.label[name] = true
		}
		b.check("$.environment.image", "its dpkg file lists were not read (%v): what it has is taken from its label %s (%d packages) and the archive's Contents index", err, imagestore.PackagesLabel, len(pkgs))
	}
	return facts
}

// archiveIndex reads the Contents index of the mirror in opts.AptSources
// for suite ("" when unknown); nil with a note when it cannot.
func (b *builder) archiveIndex(ctx context.Context, suite, arch string) (*debIndex, string) {
	if b.opts.AptSources == nil || b.opts.NoArchive {
		return nil, "the Debian archive's Contents index was not read"
	}
	mirror, suite, comps, err := mirrorFor(readAptSources(b.opts.AptSources), suite)
	if err != nil {
		return nil, fmt.Sprintf("the Debian archive's Contents index was not read: %v", err)
	}
	client := b.opts.HTTPClient
	if client == nil {
		client = archiveClient(b.opts.Policy)
	}
	ix, err := contentsIndex(ctx, client, mirror, suite, comps, arch, b.opts.CacheDir)
	if err != nil {
		return nil, fmt.Sprintf("the Debian archive's Contents index was not read: %v", err)
	}
	return ix, suite
}

// resolveNeeds decides each need's package and status, notes each one the
// image lacks, and proposes the apt.txt.
func (b *builder) resolveNeeds(ctx context.Context) {
	if b.scan == nil {
		return
	}
	sites := append([]needSite(nil), b.scan.needs...)
	for _, n := range b.entryNeeds {
		sites = append(sites, needSite{need: n, where: "the entrypoint"})
	}
	if len(sites) == 0 {
		return
	}
	img := b.chosenImage()
	var archive *debIndex
	archiveWhy := ""
	if img.index == nil || b.lacksAny(img.index, sites) {
		archive, archiveWhy = b.archiveIndex(ctx, img.suite, img.arch)
	}
	declared := setOf(b.scan.aptTxt)
	for _, s := range sites {
		n := Need{Kind: s.kind, Name: s.name, Where: s.where, Status: NeedUnchecked}
		if img.index != nil {
			if pkg, ok := img.index.lookup(s.need); ok {
				n.Package, n.Status = pkg, NeedInImage
				b.needs = append(b.needs, n)
				continue
			}
			n.Status = NeedMissing
		}
		if archive != nil {
			n.Package, _ = archive.lookup(s.need)
		}
		if img.label != nil && img.label[n.Package] && n.Package != "" {
			n.Status = NeedInImage
			b.needs = append(b.needs, n)
			continue
		} else if img.label != nil {
			n.Status = NeedMissing
		}
		if declared[n.Package] && n.Package != "" {
			n.Status = NeedDeclared
		}
		b.needs = append(b.needs, n)
		b.noteNeed(n, archive != nil, archiveWhy)
	}
	b.proposeAptTxt()
}

func (b *builder) lacksAny(ix *debIndex, sites []needSite) bool {
	for _, s := range sites {
		if _, ok := ix.lookup(s.need); !ok {
			return true
		}
	}
	return false
}

// noteNeed notes a need the image lacks (or that no image was given to check).
func (b *builder) noteNeed(n Need, indexed bool, why string) {
	pkg := "Debian package " + n.Package
	switch {
	case n.Package == "" && indexed && n.Kind == NeedR:
		pkg = fmt.Sprintf("no Debian package ships it (a CRAN-only package): list it in install.R (install.packages(%q)) and build with dotlab image build --base <the R image, examples/images/r/build.sh> --cran URL PKG_DIR, or install it in a Containerfile", n.Name)
	case n.Package == "" && indexed:
		pkg = "no Debian package ships it: install it in a Containerfile (dotlab image build --containerfile)"
	case n.Package == "":
		pkg = "its Debian package is not known (" + why + ")"
	case n.Status != NeedDeclared:
		pkg += " (in the apt.txt offered)"
	}
	see := HowTo + "#" + SectionMissing
	switch {
	case n.Status == NeedMissing:
		b.warn("$.environment.image", "%s is not in the image: %s; see %s", n, pkg, see)
	case n.Status == NeedDeclared:
		b.check("$.environment.image", "%s: %s, which the package's apt.txt names", n, pkg)
	case b.opts.Image != "":
		b.check("$.environment.image", "%s: %s; not checked against the image (its file lists were not read)", n, pkg)
	default:
		b.check("$.environment.image", "%s: %s; no image given to check it against (--image)", n, pkg)
	}
}

// proposeAptTxt is the package's apt.txt with every missing need's package added.
func (b *builder) proposeAptTxt() {
	have := setOf(b.scan.aptTxt)
	var add []string
	for _, n := range b.needs {
		if n.Package != "" && n.Status != NeedInImage && !have[n.Package] {
			have[n.Package] = true
			add = append(add, n.Package)
		}
	}
	if len(add) == 0 {
		return
	}
	sort.Strings(add)
	var s strings.Builder
	s.WriteString("# Debian packages the code needs beyond its image (dotlab manifest init); one a line\n")
	for _, p := range append(append([]string(nil), b.scan.aptTxt...), add...) {
		s.WriteString(p + "\n")
	}
	b.aptTxt = []byte(s.String())
}
