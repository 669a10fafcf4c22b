package imagestore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// bombLayer compresses (with compress, over w) a tar holding one file of
// size zero bytes, followed by tail zero bytes after the tar trailer; it
// returns the compressed blob and the diff_id of the uncompressed stream.
func bombLayer(t *testing.T, size, tail int64, compress func(io.Writer) io.WriteCloser) ([]byte, v1.Hash) {
	t.Helper()
	var out bytes.Buffer
	zw := compress(&out)
	h := sha256.New()
	w := io.MultiWriter(zw, h)
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Size: size, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeros{}, size); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(w, zeros{}, tail); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	d, _ := ParseDigest("sha256:" + hex.EncodeToString(h.Sum(nil)))
	return out.Bytes(), d
}

func gzipBest(w io.Writer) io.WriteCloser {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	return zw
}

func zstdBest(w io.Writer) io.WriteCloser {
	zw, _ := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	return zw
}

// The reproduction of issue #10 finding 6: a ~1 MB gzip layer that unpacks
// to 1 GiB is refused under the default limits, by its compression ratio.
func TestUnpackRefusesGzipBombWithDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 1 GiB")
	}
	blob, diffID := bombLayer(t, 1<<30, 0, gzipBest)
	t.Logf("bomb: %d compressed bytes for 1 GiB", len(blob))
	s := openStore(t)
	img := imageFromBlobs(t, s, testLayer{data: blob, mediaType: types.OCILayer, diffID: diffID})
	err := refusesImage(t, s, img, "Limits.MaxCompressionRatio = 100", img.Manifest.Layers[0].Digest.String())
	t.Log(err)
}

func TestUnpackRefusesZstdBomb(t *testing.T) {
	blob, diffID := bombLayer(t, 256<<20, 0, zstdBest)
	s := openStore(t)
	s.Limits = Limits{RatioCheckAfter: 1 << 20}
	img := imageFromBlobs(t, s, testLayer{data: blob, mediaType: types.OCILayerZStd, diffID: diffID})
	refusesImage(t, s, img, "MaxCompressionRatio")
}

// A small valid tar followed, inside the same compressed stream, by a long
// run of zeros: the tail is read only to verify the diff_id, and the ratio
// check still stops it.
func TestUnpackRefusesBombAfterTarTrailer(t *testing.T) {
	blob, diffID := bombLayer(t, 10, 256<<20, gzipBest)
	s := openStore(t)
	s.Limits = Limits{RatioCheckAfter: 1 << 20}
	img := imageFromBlobs(t, s, testLayer{data: blob, mediaType: types.OCILayer, diffID: diffID})
	refusesImage(t, s, img, "MaxCompressionRatio")
}

// Ordinary compressed layers below the ratio pass, and the ratio limit is
// configurable: the same layer is refused under a lower one.
func TestUnpackRatioIsConfigurable(t *testing.T) {
	var text bytes.Buffer
	for i := 0; text.Len() < 4<<20; i++ {
		fmt.Fprintf(&text, "%d,%d.%03d,sample-%d\n", i, i*7%1000, i%997, i%31)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	h := sha256.New()
	w := io.MultiWriter(zw, h)
	tw := tar.NewWriter(w)
	tw.WriteHeader(&tar.Header{Name: "data.csv", Typeflag: tar.TypeReg, Size: int64(text.Len()), Mode: 0o644})
	tw.Write(text.Bytes())
	tw.Close()
	zw.Close()
	ratio := int64(text.Len()) / int64(out.Len())
	t.Logf("csv layer: ratio %d:1", ratio)
	diffID, _ := ParseDigest("sha256:" + hex.EncodeToString(h.Sum(nil)))
	layer := testLayer{data: out.Bytes(), mediaType: types.OCILayer, diffID: diffID}

	s := openStore(t)
	s.Limits = Limits{RatioCheckAfter: 1 << 20}
	if _, err := s.Rootfs(imageFromBlobs(t, s, layer), nil); err != nil {
		t.Fatalf("ordinary layer refused: %v", err)
	}
	s2 := openStore(t)
	s2.Limits = Limits{RatioCheckAfter: 1 << 20, MaxCompressionRatio: ratio / 2}
	refusesImage(t, s2, imageFromBlobs(t, s2, layer), fmt.Sprintf("MaxCompressionRatio = %d", ratio/2))
}

func TestUnpackRefusesLargeFile(t *testing.T) {
	s := openStore(t)
	s.Limits = Limits{MaxFileBytes: 1 << 20}
	big := strings.Repeat("x", 1<<20+1)
	img := imageOf(t, s, tarBytes(t, file("small", "ok"), file("big", big)))
	refusesImage(t, s, img, "Limits.MaxFileBytes = 1048576", `"big"`, "1048577 bytes")

	// Exactly the limit passes.
	s2 := openStore(t)
	s2.Limits = Limits{MaxFileBytes: 1 << 20}
	if _, err := s2.Rootfs(imageOf(t, s2, tarBytes(t, file("big", big[1:]))), nil); err != nil {
		t.Fatal(err)
	}
}

// MaxUnpackedBytes counts every file of every layer of one image, also files
// a later layer deletes.
func TestUnpackRefusesTooManyBytesPerImage(t *testing.T) {
	s := openStore(t)
	s.Limits = Limits{MaxUnpackedBytes: 1 << 20}
	chunk := strings.Repeat("y", 400<<10)
	img := imageOf(t, s,
		tarBytes(t, file("a", chunk), file("b", chunk)),
		tarBytes(t, file(".wh.a", ""), file(".wh.b", ""), file("c", chunk)))
	refusesImage(t, s, img, "Limits.MaxUnpackedBytes = 1048576", "layer 1")
}

// MaxEntries counts entries of all layers of one image.
func TestUnpackRefusesTooManyEntriesPerImage(t *testing.T) {
	layer := func(prefix string, n int) []byte {
		hdrs := make([]*tar.Header, n)
		for i := range hdrs {
			hdrs[i] = file(fmt.Sprintf("%s%d", prefix, i), "")
		}
		return tarBytes(t, hdrs...)
	}
	s := openStore(t)
	s.Limits = Limits{MaxEntries: 1000}
	refusesImage(t, s, imageOf(t, s, layer("a", 600), layer("b", 600)), "Limits.MaxEntries = 1000", "entry number 1001", "layer 1")

	s2 := openStore(t)
	s2.Limits = Limits{MaxEntries: 1000}
	if _, err := s2.Rootfs(imageOf(t, s2, layer("a", 500), layer("b", 500)), nil); err != nil {
		t.Fatalf("1000 entries refused under a limit of 1000: %v", err)
	}
}

// Under the defaults, an image the size of a real scientific one in entries
// (150,000: a Debian image with R and many r-cran packages) unpacks: 10,000
// real files in 100 directories, and (cheap to apply, counted the same)
// whiteouts of names that do not exist, in a second layer.
func TestUnpackDefaultsAdmitManyEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 files")
	}
	var l1, l2 bytes.Buffer
	tw := tar.NewWriter(&l1)
	n := 0
	for d := 0; n < 10_000; d++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("usr/lib/R/site-library/pkg%d/", d), Typeflag: tar.TypeDir, Mode: 0o755})
		n++
		for f := 0; f < 99; f++ {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("usr/lib/R/site-library/pkg%d/R/f%d.R", d, f), Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
			tw.Write([]byte("x"))
			n++
		}
	}
	tw.Close()
	tw = tar.NewWriter(&l2)
	for ; n < 150_000; n++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf(".wh.absent%d", n), Typeflag: tar.TypeReg, Mode: 0o644})
	}
	tw.Close()
	s := openStore(t)
	if _, err := s.Rootfs(imageOf(t, s, l1.Bytes(), l2.Bytes()), nil); err != nil {
		t.Fatalf("%d entries refused under the defaults: %v", n, err)
	}
}

func TestLimitsRefuseNegativeValues(t *testing.T) {
	s := openStore(t)
	s.Limits = Limits{MaxEntries: -1}
	img := imageOf(t, s, tarBytes(t, file("x", "y")))
	if _, err := s.Rootfs(img, nil); err == nil || !strings.Contains(err.Error(), "Limits.MaxEntries = -1") {
		t.Fatalf("negative limit: %v", err)
	}
}

// A PAX (GNU 1.0) sparse entry declares a 10 GiB file in a few kilobytes of
// layer: its expanded size is what MaxFileBytes sees, before a byte is written.
func TestUnpackRefusesSparseBomb(t *testing.T) {
	const realsize = 10 << 30
	sparseMap := "0\n" // no data fragments: the whole file is one hole
	pax := paxRecords(t, map[string]string{
		"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
		"GNU.sparse.name": "var/log/lastlog", "GNU.sparse.realsize": fmt.Sprint(realsize),
	})
	body := sparseMap + strings.Repeat("\x00", 512-len(sparseMap))
	entry := entryBytes(t, &tar.Header{Name: "GNUSparseFile.0/lastlog", Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}, body)
	layer := layerOf(pax, entry)
	s := openStore(t)
	img := imageOf(t, s, layer)
	refusesImage(t, s, img, "Limits.MaxFileBytes = 4294967296", `"var/log/lastlog"`, fmt.Sprint(realsize))
	if len(layer) > 8192 {
		t.Fatalf("test layer is %d bytes, not a bomb", len(layer))
	}
}
