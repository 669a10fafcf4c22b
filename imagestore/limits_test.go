package imagestore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

// The reproduction of a hostile-image finding (docs/threat-model.md): a ~1 MB gzip layer that unpacks
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

// sparseEntry is a PAX (GNU 1.0) sparse entry for name of realsize bytes
// whose data fragments are frags (offset → bytes); everything else is a hole.
func sparseEntry(t *testing.T, name string, realsize int64, frags map[int64]string) []byte {
	t.Helper()
	offsets := make([]int64, 0, len(frags))
	for off := range frags {
		offsets = append(offsets, off)
	}
	slices.Sort(offsets)
	var sparseMap, data strings.Builder
	fmt.Fprintf(&sparseMap, "%d\n", len(offsets))
	for _, off := range offsets {
		fmt.Fprintf(&sparseMap, "%d\n%d\n", off, len(frags[off]))
		data.WriteString(frags[off])
	}
	body := sparseMap.String() + strings.Repeat("\x00", 512-sparseMap.Len()%512) + data.String()
	pax := paxRecords(t, map[string]string{
		"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
		"GNU.sparse.name": name, "GNU.sparse.realsize": fmt.Sprint(realsize),
	})
	return append(pax, entryBytes(t, &tar.Header{Name: "GNUSparseFile.0/" + path.Base(name), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}, body)...)
}

// The reproduction of the adversarial review's sparse finding: two sparse
// entries of 1 GiB each (under MaxFileBytes) in a 5 KB layer. The tar
// stream is tiny, so only the file contents the entries expand to (holes
// included) show the ratio; they are refused once RatioCheckAfter bytes of
// them have been read, and no gigabyte is ever written.
func TestUnpackRefusesSparseHolesByRatio(t *testing.T) {
	layer := layerOf(sparseEntry(t, "a", 1<<30, nil), sparseEntry(t, "b", 1<<30, nil))
	if len(layer) > 8192 {
		t.Fatalf("test layer is %d bytes, not a bomb", len(layer))
	}
	s := openStore(t)
	start := time.Now()
	err := refusesImage(t, s, imageOf(t, s, layer), "Limits.MaxCompressionRatio = 100", "sparse holes included", `entry "a"`)
	t.Logf("%d-byte layer refused in %v: %v", len(layer), time.Since(start), err)
}

// A legitimate sparse file under the limits unpacks with its exact content,
// and its holes stay holes on disk.
func TestUnpackSparseFileStaysSparse(t *testing.T) {
	const realsize = 32 << 20 // under RatioCheckAfter
	frags := map[int64]string{0: "head", 5<<20 + 3: "unaligned middle", realsize - 4: "tail"}
	s := openStore(t)
	rootfs, err := s.Rootfs(imageOf(t, s, layerOf(sparseEntry(t, "var/log/lastlog", realsize, frags))), nil)
	if err != nil {
		t.Fatalf("legitimate sparse file refused: %v", err)
	}
	p := filepath.Join(rootfs, "var/log/lastlog")
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, realsize)
	for off, b := range frags {
		copy(want[off:], b)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("content differs from the entry's (%d bytes read, want %d)", len(got), len(want))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d-byte sparse file allocates %d bytes", st.Size, st.Blocks*512)
	if st.Blocks*512 > 1<<20 {
		t.Fatalf("sparse file of %d bytes allocates %d bytes: holes were written as zeros", st.Size, st.Blocks*512)
	}
}

// zstdWindowFrames is the adversarial review's layer: 2000 zstd frames of
// one RLE block each, every frame header announcing a 512 MiB window (the
// format's largest default). Unbounded, the decoder allocated ~512 MiB for
// this 12 KB blob.
func zstdWindowFrames() []byte {
	var b bytes.Buffer
	for i := 0; i < 2000; i++ {
		b.Write([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte((29 - 10) << 3)}) // magic, FHD, window log 29
		hdr := uint32(1) | uint32(1)<<1 | uint32((1<<17)-1)<<3              // last block, RLE, 128 KiB - 1
		b.Write([]byte{byte(hdr), byte(hdr >> 8), byte(hdr >> 16), 0})
	}
	return b.Bytes()
}

func TestUnpackRefusesLargeZstdWindow(t *testing.T) {
	s := openStore(t)
	data := zstdWindowFrames()
	diffID, _ := ParseDigest("sha256:" + strings.Repeat("0", 64))
	img := imageFromBlobs(t, s, testLayer{data: data, mediaType: types.OCILayerZStd, diffID: diffID})
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	err := refusesImage(t, s, img, "Limits.MaxZstdWindow = 134217728", img.Manifest.Layers[0].Digest.String())
	runtime.ReadMemStats(&m1)
	grew := int64(m1.TotalAlloc - m0.TotalAlloc)
	t.Logf("%d-byte layer: %v; allocated %d KiB while refusing", len(data), err, grew>>10)
	if grew > 64<<20 {
		t.Fatalf("refusing the layer allocated %d MiB: the decoder window is not bounded", grew>>20)
	}
}

// The window bound is a limit like the others: an ordinary zstd layer with
// a 1 MiB window passes the default and is refused under a lower bound.
func TestUnpackZstdWindowIsConfigurable(t *testing.T) {
	blob, diffID := bombLayer(t, 4<<20, 0, func(w io.Writer) io.WriteCloser {
		zw, _ := zstd.NewWriter(w, zstd.WithWindowSize(1<<20))
		return zw
	})
	layer := testLayer{data: blob, mediaType: types.OCILayerZStd, diffID: diffID}
	s := openStore(t)
	s.Limits = Limits{MaxCompressionRatio: 1 << 40}
	if _, err := s.Rootfs(imageFromBlobs(t, s, layer), nil); err != nil {
		t.Fatalf("1 MiB window refused under the defaults: %v", err)
	}
	s2 := openStore(t)
	s2.Limits = Limits{MaxCompressionRatio: 1 << 40, MaxZstdWindow: 512 << 10}
	refusesImage(t, s2, imageFromBlobs(t, s2, layer), "Limits.MaxZstdWindow = 524288")
	s3 := openStore(t)
	s3.Limits = Limits{MaxZstdWindow: 1000}
	if _, err := s3.Rootfs(imageFromBlobs(t, s3, layer), nil); err == nil || !strings.Contains(err.Error(), "Limits.MaxZstdWindow = 1000") {
		t.Fatalf("a window bound below zstd's minimum: %v", err)
	}
}
