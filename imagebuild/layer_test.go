package imagebuild

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestNormalizeLayerTrimsAndCanonicalizes: trimmed paths (and whiteouts of
// them, and hard links to them) are dropped; kept entries get epoch times,
// no owner names and only extended-attribute PAX records; devices are refused.
func TestNormalizeLayerTrimsAndCanonicalizes(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		h.ModTime, h.Uname, h.Gname, h.Format = time.Unix(1700000000, 0), "builder", "builder", tar.FormatPAX
		tw.WriteHeader(h)
		io.WriteString(tw, body)
	}
	add(&tar.Header{Name: "usr/bin/tool", Mode: 0o755, PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "cap", "SCHILY.xattr.security.selinux": "ctx", "atime": "1"}}, "bin")
	add(&tar.Header{Name: "var/log/apt/history.log"}, "log")
	add(&tar.Header{Name: "usr/share/doc/tool/README"}, "doc")
	add(&tar.Header{Name: "usr/bin/readme", Typeflag: tar.TypeLink, Linkname: "usr/share/doc/tool/README"}, "")
	add(&tar.Header{Name: "usr/lib/python3/dist-packages/x/__pycache__/a.pyc"}, "pyc")
	add(&tar.Header{Name: "var/cache/apt/.wh.pkgcache.bin"}, "")
	add(&tar.Header{Name: "etc/passwd-"}, "old")
	add(&tar.Header{Name: "var/lib/dpkg/status"}, "Package: tool\n")
	add(&tar.Header{Name: PackagesFile}, "tool=1.0\n")
	tw.Close()
	var out bytes.Buffer
	info, err := normalizeLayer(&in, &out)
	if err != nil {
		t.Fatal(err)
	}
	if info.entries != 3 || !info.dpkgChanged || string(info.packages) != "tool=1.0\n" {
		t.Fatalf("info %+v", info)
	}
	tr := tar.NewReader(&out)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: header not canonical: %v %q %q", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		if h.Name == "usr/bin/tool" && (len(h.PAXRecords) != 1 || h.PAXRecords["SCHILY.xattr.security.capability"] != "cap") {
			t.Errorf("PAX records kept: %v", h.PAXRecords)
		}
	}
	if got := strings.Join(names, " "); got != "usr/bin/tool var/lib/dpkg/status "+PackagesFile {
		t.Fatalf("kept %s", got)
	}
	var dev bytes.Buffer
	tw = tar.NewWriter(&dev)
	tw.WriteHeader(&tar.Header{Name: "opt/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3})
	tw.Close()
	if _, err := normalizeLayer(&dev, io.Discard); err == nil {
		t.Fatal("a device node was kept")
	}
}
