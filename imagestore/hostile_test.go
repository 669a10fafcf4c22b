package imagestore

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entryBytes is one tar entry (header and padded body) without the
// end-of-archive trailer, so that entries can be concatenated with raw ones.
func entryBytes(t *testing.T, hdr *tar.Header, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA {
		hdr.Size = int64(len(body))
	}
	if hdr.Mode == 0 && hdr.Typeflag != tar.TypeXGlobalHeader {
		hdr.Mode = 0o644
	}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatalf("entry %q: %v", hdr.Name, err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// paxRecords is a raw PAX extended header ('x') carrying exactly records,
// written by hand so that records such as "path" and "linkpath" are what the
// test says, not what archive/tar's writer would derive from a Header.
func paxRecords(t *testing.T, records map[string]string) []byte {
	t.Helper()
	keys := make([]string, 0, len(records))
	for k := range records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var body strings.Builder
	for _, k := range keys {
		rec := " " + k + "=" + records[k] + "\n"
		n := len(rec) + 1
		for len(fmt.Sprint(n))+len(rec) != n {
			n = len(fmt.Sprint(n)) + len(rec)
		}
		fmt.Fprintf(&body, "%d%s", n, rec)
	}
	b := entryBytes(t, &tar.Header{Name: "PaxHeaders/entry", Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}, body.String())
	b[156] = tar.TypeXHeader
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b[:512] {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// layerOf concatenates entries and the end-of-archive trailer.
func layerOf(chunks ...[]byte) []byte {
	var buf bytes.Buffer
	for _, c := range chunks {
		buf.Write(c)
	}
	buf.Write(make([]byte, 1024))
	return buf.Bytes()
}

func ent(t *testing.T, name string, typ byte, link string) []byte {
	return entryBytes(t, &tar.Header{Name: name, Typeflag: typ, Linkname: link, Format: tar.FormatPAX}, "")
}

func reg(t *testing.T, name, body string) []byte {
	return entryBytes(t, &tar.Header{Name: name, Typeflag: tar.TypeReg, Format: tar.FormatPAX}, body)
}

// outsideDir is a directory beside the store holding a sentinel file and a
// subdirectory; snapshot records it so a test can show nothing changed.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sentinel"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out[p] = "error " + err.Error()
			return nil
		}
		fi, _ := d.Info()
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			v += " " + string(data)
		}
		out[p] = v
		return nil
	})
	return out
}

// assertNoLeftovers fails if the store holds a rootfs (finished or partial)
// or anything in its tmp directory.
func assertNoLeftovers(t *testing.T, s *Store) {
	t.Helper()
	for _, d := range []string{s.tmpDir(), filepath.Join(s.dir, "rootfs", "sha256")} {
		names, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			t.Errorf("left in %s after a refusal: %s", d, n.Name())
		}
	}
}

// refusesImage unpacks img and asserts an ErrUnsafeImage refusal naming
// every string of want, with nothing left in the store.
func refusesImage(t *testing.T, s *Store, img *Image, want ...string) error {
	t.Helper()
	_, err := s.Rootfs(img, nil)
	if !errors.Is(err, ErrUnsafeImage) {
		t.Fatalf("not refused as unsafe: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal does not say %q: %v", w, err)
		}
	}
	assertNoLeftovers(t, s)
	return err
}

func TestUnpackRefusesHostileEntries(t *testing.T) {
	up := strings.Repeat("../", 24)
	long := strings.Repeat("a/", 2100) + "f"
	cases := []struct {
		name   string
		layers func(t *testing.T, outside string) [][]byte
		want   []string
	}{
		{"dotdot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, up+o+"/sentinel", "escaped"))}
		}, []string{`".." component`, "sentinel"}},
		{"dotdot-inside", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "usr/../../x", "escaped"))}
		}, []string{`".." component`}},
		{"dotdot-trailing", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "etc/..", tar.TypeDir, ""))}
		}, []string{`".." component`}},
		{"pax-path-dotdot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(paxRecords(t, map[string]string{"path": up + o + "/sentinel"}), reg(t, "innocent", "escaped"))}
		}, []string{`".." component`, "sentinel"}},
		{"pax-linkpath-dotdot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(paxRecords(t, map[string]string{"linkpath": up + o + "/sentinel"}), ent(t, "h", tar.TypeLink, "innocent"))}
		}, []string{"hard link target", `".." component`}},
		{"hardlink-dotdot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "h", tar.TypeLink, up+o+"/sentinel"))}
		}, []string{"hard link target", `".." component`}},
		{"hardlink-absolute-outside", func(t *testing.T, o string) [][]byte {
			// An absolute target means "from the rootfs": this one does not exist there.
			return [][]byte{layerOf(ent(t, "h", tar.TypeLink, o+"/sentinel"))}
		}, []string{"does not exist"}},
		{"hardlink-to-root", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "h", tar.TypeLink, "./"))}
		}, []string{"hard link to the root"}},
		{"hardlink-to-directory", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "etc/", tar.TypeDir, ""), ent(t, "h", tar.TypeLink, "etc"))}
		}, []string{"hard link to the directory"}},
		{"hardlink-to-itself", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "h", tar.TypeLink, "./h"))}
		}, []string{"hard link to itself"}},
		{"symlink-named-dot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, ".", tar.TypeSymlink, o), reg(t, "sentinel", "escaped"))}
		}, []string{"names the root directory itself"}},
		{"symlink-named-dot-slash", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "./", tar.TypeSymlink, o))}
		}, []string{"names the root directory itself"}},
		{"file-named-slash", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(paxRecords(t, map[string]string{"path": "/"}), reg(t, "x", "root"))}
		}, []string{"names the root directory itself"}},
		{"file-named-dot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, ".", "x"))}
		}, []string{"names the root directory itself"}},
		{"empty-name", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "", "x"))}
		}, []string{"empty name"}},
		{"whiteout-empty", func(t *testing.T, o string) [][]byte {
			return [][]byte{
				layerOf(ent(t, "etc/", tar.TypeDir, ""), reg(t, "etc/passwd", "root")),
				layerOf(reg(t, "etc/.wh.", "")),
			}
		}, []string{`whiteout of ""`, "etc/.wh."}},
		{"whiteout-dot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "etc/", tar.TypeDir, "")), layerOf(reg(t, "etc/.wh..", ""))}
		}, []string{`whiteout of "."`}},
		{"whiteout-dotdot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "etc/", tar.TypeDir, "")), layerOf(reg(t, "etc/.wh...", ""))}
		}, []string{`whiteout of ".."`}},
		{"whiteout-root", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "bin", "x")), layerOf(reg(t, "./.wh.", ""))}
		}, []string{`whiteout of ""`}},
		{"whiteout-pax-dotdot", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(paxRecords(t, map[string]string{"path": up + o + "/.wh.sentinel"}), reg(t, "x", ""))}
		}, []string{`".." component`}},
		{"whiteout-directory", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, ".wh.etc/", tar.TypeDir, ""))}
		}, []string{"is a directory"}},
		{"whiteout-in-directory-component", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "a/.wh.b/c", ""))}
		}, []string{"whiteout names only as the last component"}},
		{"whiteout-reserved-meta", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, ".wh..wh.plnk", ""))}
		}, []string{"reserved whiteout metadata"}},
		{"empty-component", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "etc//passwd", "x"))}
		}, []string{"empty component"}},
		{"dot-component", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "etc/./passwd", "x"))}
		}, []string{`"." component`}},
		{"file-with-trailing-slash", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "etc/passwd/", tar.TypeSymlink, "x"))}
		}, []string{`ends in "/"`}},
		{"nul-in-name", func(t *testing.T, o string) [][]byte {
			// archive/tar itself rejects a PAX path with NUL: the layer is not a valid tar stream.
			return [][]byte{layerOf(paxRecords(t, map[string]string{"path": "etc/pass\x00wd"}), reg(t, "x", ""))}
		}, []string{"not a valid tar stream"}},
		{"nul-in-symlink-target", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(paxRecords(t, map[string]string{"linkpath": "/etc\x00/x"}), ent(t, "l", tar.TypeSymlink, "x"))}
		}, []string{"not a valid tar stream"}},
		{"long-component", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "etc/"+strings.Repeat("n", 300), "x"))}
		}, []string{"component of 300 bytes"}},
		{"long-name", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, long, "x"))}
		}, []string{fmt.Sprintf("name of %d bytes", len(long))}},
		{"long-symlink-target", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "l", tar.TypeSymlink, long))}
		}, []string{"symbolic link target of"}},
		{"empty-symlink-target", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "l", tar.TypeSymlink, ""))}
		}, []string{"empty target"}},
		{"unknown-entry-type", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(entryBytes(t, &tar.Header{Name: "v", Typeflag: 'V', Format: tar.FormatUSTAR}, ""))}
		}, []string{"entry type"}},
		{"symlink-then-file", func(t *testing.T, o string) [][]byte {
			// A directory, replaced by a symbolic link out of the rootfs, then written through.
			return [][]byte{layerOf(ent(t, "d/", tar.TypeDir, ""), reg(t, "d/x", "in"),
				ent(t, "d", tar.TypeSymlink, o), reg(t, "d/sentinel", "escaped"))}
		}, []string{`written through the symbolic link "d"`}},
		{"symlink-relative-then-file", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "up", tar.TypeSymlink, up+o), reg(t, "up/sentinel", "escaped"))}
		}, []string{`written through the symbolic link "up"`}},
		{"symlink-then-file-next-layer", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "etc", tar.TypeSymlink, o+"/etc")), layerOf(reg(t, "etc/passwd", "evil::0:0"))}
		}, []string{`written through the symbolic link "etc"`}},
		{"symlink-inside-then-file", func(t *testing.T, o string) [][]byte {
			// Even a link that stays inside the rootfs is not written through.
			return [][]byte{layerOf(ent(t, "usr/", tar.TypeDir, ""), ent(t, "bin", tar.TypeSymlink, "usr")), layerOf(reg(t, "bin/sh", "x"))}
		}, []string{`written through the symbolic link "bin"`}},
		{"hardlink-to-symlink-then-file", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "l", tar.TypeSymlink, o), ent(t, "h", tar.TypeLink, "l"), reg(t, "h/sentinel", "escaped"))}
		}, []string{`written through the symbolic link "h"`}},
		{"hardlink-through-symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "l", tar.TypeSymlink, o), ent(t, "h", tar.TypeLink, "l/sentinel"))}
		}, []string{`written through the symbolic link "l"`}},
		{"whiteout-through-symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "l", tar.TypeSymlink, o)), layerOf(reg(t, "l/.wh.sentinel", ""))}
		}, []string{`written through the symbolic link "l"`}},
		{"opaque-through-symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(ent(t, "l", tar.TypeSymlink, o)), layerOf(reg(t, "l/.wh..wh..opq", ""))}
		}, []string{`written through the symbolic link "l"`}},
		{"parent-is-a-file", func(t *testing.T, o string) [][]byte {
			return [][]byte{layerOf(reg(t, "etc", "file"), reg(t, "etc/passwd", "x"))}
		}, []string{"cannot create its parent directory"}},
		{"garbage-after-header", func(t *testing.T, o string) [][]byte {
			b := reg(t, "x", "data")
			b[0] = 0 // an empty first block followed by a non-empty one: not a tar trailer
			return [][]byte{append(b, bytes.Repeat([]byte{0xff}, 1024)...)}
		}, []string{"not a valid tar stream"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// refuses makes its own outside dir; the layer must name that one.
			outside := outsideDir(t)
			before := snapshot(t, outside)
			s := openStore(t)
			img := imageOf(t, s, c.layers(t, outside)...)
			_, err := s.Rootfs(img, nil)
			if !errors.Is(err, ErrUnsafeImage) {
				t.Fatalf("not refused as unsafe: %v", err)
			}
			for _, w := range append([]string{img.Manifest.Layers[len(img.Manifest.Layers)-1].Digest.String()[:19]}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal does not say %q: %v", w, err)
				}
			}
			if after := snapshot(t, outside); fmt.Sprint(before) != fmt.Sprint(after) {
				t.Errorf("the directory beside the store changed:\nbefore %v\nafter  %v", before, after)
			}
			assertNoLeftovers(t, s)
			t.Log(err)
		})
	}
}

// TestUnpackAcceptsConventionalForms: the forms real image tools write stay accepted.
func TestUnpackAcceptsConventionalForms(t *testing.T) {
	s := openStore(t)
	global := entryBytes(t, &tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "built by hand"}, Format: tar.FormatPAX}, "")
	l1 := layerOf(global,
		ent(t, "./", tar.TypeDir, ""),
		ent(t, "./etc/", tar.TypeDir, ""),
		reg(t, "./etc/passwd", "root:x:0:0"),
		reg(t, "/abs/file", "leading slash"),
		reg(t, "//usr/lib/x", "double leading slash"),
		ent(t, "etc/abs-link", tar.TypeSymlink, "/etc/passwd"),
		ent(t, "etc/up-link", tar.TypeSymlink, "../../../../etc/passwd"),
		ent(t, "hard", tar.TypeLink, "/etc/passwd"),
		ent(t, "./hard2", tar.TypeLink, "./etc/passwd"),
		entryBytes(t, &tar.Header{Name: "dev/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Format: tar.FormatPAX}, ""),
		entryBytes(t, &tar.Header{Name: "run/fifo", Typeflag: tar.TypeFifo, Format: tar.FormatPAX}, ""),
		ent(t, "old/", tar.TypeDir, ""), reg(t, "old/a", "a"),
		ent(t, "gone/", tar.TypeDir, ""), reg(t, "gone/b", "b"),
		ent(t, "bin", tar.TypeSymlink, "usr/bin"),
		ent(t, ".", tar.TypeDir, ""),
		ent(t, "/", tar.TypeDir, ""),
	)
	l2 := layerOf(
		reg(t, "./old/.wh..wh..opq", ""), reg(t, "old/new", "new"),
		reg(t, ".wh.gone", ""),
		// A directory entry replaces the symbolic link; entries below it then go into the directory.
		ent(t, "bin/", tar.TypeDir, ""), reg(t, "bin/sh", "sh"),
		reg(t, ".wh.never-existed", ""),
	)
	rootfs, err := s.Rootfs(imageOf(t, s, l1, l2), nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string { b, _ := os.ReadFile(filepath.Join(rootfs, p)); return string(b) }
	for p, want := range map[string]string{"etc/passwd": "root:x:0:0", "abs/file": "leading slash", "usr/lib/x": "double leading slash",
		"hard": "root:x:0:0", "hard2": "root:x:0:0", "old/new": "new", "bin/sh": "sh"} {
		if got := read(p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for p, want := range map[string]string{"etc/abs-link": "/etc/passwd", "etc/up-link": "../../../../etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(rootfs, p)); got != want {
			t.Errorf("%s -> %q (%v), want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"old/a", "gone", "dev/null", "run/fifo"} {
		if _, err := os.Lstat(filepath.Join(rootfs, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v), want it removed or skipped", p, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(rootfs, "bin")); err != nil || !fi.IsDir() {
		t.Errorf("bin is not a directory after the directory entry replaced the link: %v", err)
	}
}

func TestUnpackRefusesUnknownLayerMediaType(t *testing.T) {
	s := openStore(t)
	layer := layerOf(reg(t, "x", "y"))
	d, err := ParseDigest(sha256Digest(layer))
	if err != nil {
		t.Fatal(err)
	}
	img := imageFromBlobs(t, s, testLayer{data: layer, mediaType: "application/vnd.example.unknown", diffID: d})
	_, err = s.Rootfs(img, nil)
	if !errors.Is(err, ErrUnsafeImage) || !strings.Contains(err.Error(), "application/vnd.example.unknown") {
		t.Fatalf("unknown layer media type: %v", err)
	}
	assertNoLeftovers(t, s)
}

// testLayer is a layer blob as stored, with the diff_id the config claims for it.
type testLayer struct {
	data      []byte
	mediaType types.MediaType
	diffID    v1.Hash
}

// imageFromBlobs stores layers, a config and a manifest as given (no
// recomputation of diff_ids, so a test can build a bomb without expanding it).
func imageFromBlobs(t *testing.T, s *Store, layers ...testLayer) *Image {
	t.Helper()
	cfg := v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1}
	for _, l := range layers {
		d, _ := ParseDigest(sha256Digest(l.data))
		if err := s.putBlob(bytes.NewReader(l.data), d, int64(len(l.data)), "test layer"); err != nil {
			t.Fatal(err)
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: l.mediaType, Size: int64(len(l.data)), Digest: d})
	}
	cd, err := s.putJSON(cfg, types.OCIConfigJSON, "test config")
	if err != nil {
		t.Fatal(err)
	}
	m.Config = cd
	md, err := s.putJSON(m, types.OCIManifestSchema1, "test manifest")
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Image(md.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestOsRootHoldsWithoutBookkeeping: if the unpacker's record of symbolic
// links were ever wrong, os.Root is the second line: a write through a link
// out of the tree still fails, is refused as unsafe, and changes nothing.
func TestOsRootHoldsWithoutBookkeeping(t *testing.T) {
	outside := outsideDir(t)
	before := snapshot(t, outside)
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../../../.."+outside, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	limits, _ := Limits{}.effective()
	// The links are not recorded, neither through os.Root alone nor through
	// the directory descriptors of imagestore/unpackfs.go (O_NOFOLLOW).
	dirs, err := newDirFDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dirs.close()
	for _, u := range []*unpacker{{root: root, limits: limits, links: map[string]bool{}}, {root: root, dirs: dirs, limits: limits, links: map[string]bool{}}} {
		osRootHolds(t, u)
	}
	if after := snapshot(t, outside); fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("outside changed:\nbefore %v\nafter  %v", before, after)
	}
}

func osRootHolds(t *testing.T, u *unpacker) {
	for _, name := range []string{"evil/sentinel", "up/sentinel", "evil/etc/passwd", "evil/new", "evil/d/", "up/l"} {
		hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Size: 7, Mode: 0o644}
		switch {
		case strings.HasSuffix(name, "/"):
			hdr = &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}
		case strings.HasSuffix(name, "/l"):
			hdr = &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}
		}
		err := u.entry(strings.NewReader("escaped"), hdr, map[string]bool{})
		var rule ruleError
		if !errors.As(err, &rule) {
			t.Errorf("%s: write through an escaping link not refused: %v", name, err)
		}
	}
	for _, name := range []string{"evil/.wh.sentinel", "up/etc/.wh..wh..opq"} {
		if err := u.entry(strings.NewReader(""), &tar.Header{Name: name, Typeflag: tar.TypeReg}, map[string]bool{}); err == nil {
			t.Errorf("%s: whiteout through an escaping link not refused", name)
		}
	}
}

// A mount point of the sandbox, or a parent of one, that the image makes
// anything but a directory is refused, never replaced (the adversarial
// review found them clamped to directories while docs/sandbox.md said
// refused). Only the final tree counts: a lower layer's link that an upper
// layer replaces with a directory is fine.
func TestUnpackRefusesNonDirectoryMountPoints(t *testing.T) {
	cases := map[string]struct {
		layers [][]byte
		want   []string
	}{
		"tmp-symlink":       {[][]byte{layerOf(ent(t, "etc/", tar.TypeDir, ""), ent(t, "tmp", tar.TypeSymlink, "etc"))}, []string{`entry "tmp" is a symlink to "etc"`, "/tmp"}},
		"proc-to-fd":        {[][]byte{layerOf(ent(t, "proc", tar.TypeSymlink, "/proc/self/fd/7"))}, []string{`entry "proc" is a symlink to "/proc/self/fd/7"`}},
		"sys-symlink":       {[][]byte{layerOf(ent(t, "sys", tar.TypeSymlink, "/"))}, []string{`entry "sys"`}},
		"dev-symlink":       {[][]byte{layerOf(ent(t, "dev", tar.TypeSymlink, "/tmp"))}, []string{`entry "dev"`}},
		"work-file":         {[][]byte{layerOf(reg(t, "work", "i am a file"))}, []string{`entry "work" is a regular file`}},
		"work-code-symlink": {[][]byte{layerOf(ent(t, "work/", tar.TypeDir, ""), ent(t, "work/code", tar.TypeSymlink, "/etc"))}, []string{`entry "work/code"`}},
		"work-out-hardlink": {[][]byte{layerOf(reg(t, "f", "x"), ent(t, "work/", tar.TypeDir, ""), ent(t, "work/out", tar.TypeLink, "f"))}, []string{`entry "work/out" is a regular file`}},
		"later-layer":       {[][]byte{layerOf(ent(t, "tmp/", tar.TypeDir, "")), layerOf(ent(t, "tmp", tar.TypeSymlink, "var/tmp"))}, []string{`entry "tmp"`}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			err := refusesImage(t, s, imageOf(t, s, c.layers...), append(c.want, "rule: a mount point of the sandbox (/proc, /sys, /dev, /tmp, /work and their parents) must be a directory or absent in the image")...)
			t.Log(err)
		})
	}

	// Directories (of any mode), absent mount points and a link an upper
	// layer replaced pass; /tmp becomes 1777 whatever the image's mode.
	s := openStore(t)
	rootfs, err := s.Rootfs(imageOf(t, s,
		layerOf(ent(t, "tmp", tar.TypeSymlink, "var/tmp"), entryBytes(t, &tar.Header{Name: "proc/", Typeflag: tar.TypeDir, Mode: 0o555, Format: tar.FormatPAX}, "")),
		layerOf(ent(t, "tmp/", tar.TypeDir, ""), ent(t, "run", tar.TypeSymlink, "/tmp"), ent(t, "var/run", tar.TypeSymlink, "../run"))), nil)
	if err != nil {
		t.Fatalf("directory mount points refused: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(rootfs, "tmp")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 || fi.Mode()&fs.ModeSticky == 0 {
		t.Fatalf("/tmp: %v %v, want a 1777 directory", fi.Mode(), err)
	}
	for _, mp := range mountPoints {
		if fi, err := os.Lstat(filepath.Join(rootfs, mp)); err != nil || !fi.IsDir() {
			t.Errorf("mount point /%s not created: %v", mp, err)
		}
	}
}
