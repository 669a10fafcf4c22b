package scaffold

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultAptSources are the files naming this machine's Debian mirror
// (one-line sources.list entries and deb822 .sources paragraphs).
func DefaultAptSources() []string {
	files := []string{"/etc/apt/sources.list"}
	for _, pat := range []string{"/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	return files
}

// aptSource is one "deb" entry: a mirror, its suites and components.
type aptSource struct {
	uri        string
	suites     []string
	components []string
}

// readAptSources reads the "deb" entries of the files (missing files are skipped).
func readAptSources(files []string) []aptSource {
	var out []aptSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) > 1<<20 {
			continue
		}
		if strings.HasSuffix(f, ".sources") {
			out = append(out, deb822Sources(string(data))...)
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			l, _, _ = strings.Cut(l, "#")
			fields := strings.Fields(l)
			if len(fields) < 3 || fields[0] != "deb" {
				continue
			}
			if strings.HasPrefix(fields[1], "[") { // [arch=amd64 signed-by=…], [ arch=amd64 ]
				end := 1
				for end < len(fields) && !strings.HasSuffix(fields[end], "]") {
					end++
				}
				fields = append([]string{"deb"}, fields[min(end+1, len(fields)):]...)
			}
			if len(fields) >= 3 {
				out = append(out, aptSource{uri: fields[1], suites: fields[2:3], components: fields[3:]})
			}
		}
	}
	return out
}

// deb822Sources reads the paragraphs of a .sources file.
func deb822Sources(text string) []aptSource {
	var out []aptSource
	for _, para := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n\n") {
		f := map[string]string{}
		for _, l := range strings.Split(para, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, " ") {
				f[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !strings.Contains(" "+f["types"]+" ", " deb ") || strings.EqualFold(f["enabled"], "no") {
			continue
		}
		for _, u := range strings.Fields(f["uris"]) {
			out = append(out, aptSource{uri: u, suites: strings.Fields(f["suites"]), components: strings.Fields(f["components"])})
		}
	}
	return out
}

// mirrorFor picks the mirror and components for suite ("" = the first
// source's first suite): the first source listing it, else the first
// source that is not a security archive.
func mirrorFor(sources []aptSource, suite string) (uri, chosen string, components []string, err error) {
	var first *aptSource
	for i, s := range sources {
		if strings.Contains(s.uri, "security") || len(s.suites) == 0 {
			continue
		}
		if first == nil {
			first = &sources[i]
		}
		for _, su := range s.suites {
			if su == suite {
				return s.uri, suite, s.components, nil
			}
		}
	}
	if first == nil {
		return "", "", nil, fmt.Errorf("no Debian mirror in the apt sources")
	}
	if suite == "" {
		suite = first.suites[0]
	}
	return first.uri, suite, first.components, nil
}

// Bounds of the archive's index files.
const (
	maxReleaseBytes  = 4 << 20
	maxContentsBytes = 256 << 20  // compressed, each
	maxContentsText  = 8192 << 20 // uncompressed, each
	contentsTimeout  = 10 * time.Minute
)

// contentsIndex builds the index of what the archive's packages ship in
// suite from Contents-ARCH.gz and Contents-all.gz of each component,
// each checked against the SHA-256 the suite's Release file gives. The
// filtered index is cached under cacheDir/debian-contents by that
// SHA-256 ("" cacheDir: no cache).
func contentsIndex(ctx context.Context, client *http.Client, mirror, suite string, components []string, arch, cacheDir string) (*debIndex, error) {
	ctx, cancel := context.WithTimeout(ctx, contentsTimeout)
	defer cancel()
	for _, w := range append([]string{suite, arch}, components...) {
		if !archiveWord().MatchString(w) {
			return nil, fmt.Errorf("%q is not a suite, component or architecture name: not put into a mirror URL", w)
		}
	}
	base := strings.TrimSuffix(mirror, "/") + "/dists/" + suite + "/"
	rel, err := fetch(ctx, client, base+"Release", maxReleaseBytes)
	if err != nil {
		return nil, err
	}
	sums := releaseSHA256(string(rel))
	if len(components) == 0 {
		components = []string{"main"}
	}
	ix := newDebIndex()
	found := 0
	for _, comp := range components {
		for _, a := range []string{arch, "all"} {
			name := comp + "/Contents-" + a + ".gz"
			sum, ok := sums[name]
			if !ok {
				continue
			}
			found++
			if err := ix.addContents(ctx, client, base+name, sum, cacheDir); err != nil {
				return nil, err
			}
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("%sRelease lists no Contents-%s.gz or Contents-all.gz for %s", base, arch, strings.Join(components, ", "))
	}
	return ix, nil
}

// fileSum is a file the Release lists: its SHA-256 and size.
type fileSum struct {
	sha256 string
	size   int64
}

// releaseSHA256 reads the SHA256 section of a Release file.
func releaseSHA256(text string) map[string]fileSum {
	out := map[string]fileSum{}
	in := false
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, " ") {
			in = strings.HasPrefix(l, "SHA256:")
			continue
		}
		f := strings.Fields(l)
		if in && len(f) == 3 && len(f[0]) == 64 {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out[f[2]] = fileSum{strings.ToLower(f[0]), n}
			}
		}
	}
	return out
}

// addContents adds one Contents file, from the cache or the mirror.
func (ix *debIndex) addContents(ctx context.Context, client *http.Client, url string, sum fileSum, cacheDir string) error {
	cached := ""
	if cacheDir != "" {
		cached = filepath.Join(cacheDir, "debian-contents", sum.sha256+".txt")
		if err := ix.readCached(cached); err == nil {
			return nil
		}
	}
	if sum.size > maxContentsBytes {
		return fmt.Errorf("%s: %d bytes, over the %d MiB bound", url, sum.size, maxContentsBytes>>20)
	}
	gz, err := fetch(ctx, client, url, sum.size)
	if err != nil {
		return err
	}
	if h := sha256.Sum256(gz); hex.EncodeToString(h[:]) != sum.sha256 {
		return fmt.Errorf("%s: SHA-256 %x, the Release file says %s", url, h, sum.sha256)
	}
	part := newDebIndex()
	if err := part.readContents(gz); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if cached != "" {
		_ = part.writeCached(cached) // a cache that cannot be written is only slower
	}
	ix.merge(part)
	return nil
}

// readContents reads a Contents file: "PATH  SECTION/PACKAGE[,SECTION/PACKAGE…]" lines.
func (ix *debIndex) readContents(gz []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return err
	}
	lr := &io.LimitedReader{R: zr, N: maxContentsText + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "usr/") && !strings.HasPrefix(l, "bin/") {
			continue
		}
		i := strings.LastIndexAny(l, " \t")
		if i < 0 {
			continue
		}
		p := strings.TrimRight(l[:i], " \t")
		for _, loc := range strings.Split(l[i+1:], ",") {
			ix.add(p, loc[strings.LastIndexByte(loc, '/')+1:])
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if lr.N <= 0 {
		return fmt.Errorf("over %d GiB uncompressed", maxContentsText>>30)
	}
	return nil
}

// The cache file: "owner|part<TAB>kind<TAB>name<TAB>package" lines.
func (ix *debIndex) writeCached(p string) error {
	var b strings.Builder
	for tag, m := range map[string]map[need][]string{"owner": ix.owners, "part": ix.parts} {
		for n, pkgs := range m {
			for _, pkg := range pkgs {
				fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", tag, n.kind, n.name, pkg)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".contents-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

func (ix *debIndex) readCached(p string) error {
	root, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer root.Close()
	part := newDebIndex()
	_, err = readLines(root, filepath.Base(p), maxContentsBytes, func(l string) {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			return
		}
		m := part.parts
		if f[0] == "owner" {
			m = part.owners
		}
		n := need{f[1], f[2]}
		m[n] = append(m[n], f[3])
	})
	if err != nil {
		return err
	}
	ix.merge(part)
	return nil
}

func (ix *debIndex) merge(o *debIndex) {
	for _, pair := range [][2]map[need][]string{{ix.owners, o.owners}, {ix.parts, o.parts}} {
		for n, pkgs := range pair[1] {
			pair[0][n] = append(pair[0][n], pkgs...)
			sort.Strings(pair[0][n])
		}
	}
}

// fetch GETs url, refusing a body over limit bytes.
func fetch(ctx context.Context, client *http.Client, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes", url, limit)
	}
	return body, nil
}

// debianArch is Debian's name for a Go architecture.
func debianArch(goarch string) string {
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	switch goarch {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	}
	return goarch
}
