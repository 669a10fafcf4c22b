package imagestore

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// ErrUnsafeImage is wrapped by every refusal of an image that cannot be pulled
// or unpacked safely as its digest pins it: an entry name or link target that
// breaks a rule of validateEntry, a layer of unknown media type, a limit of
// Limits exceeded, or a registry request to a host other than the image's
// registry (and the token realm it announces). The wrapping message names the
// layer, the entry and the rule, or the limit and its value. Because the
// image is pinned by digest, a refusal holds on every runner: the claim cannot
// be executed as written.
var ErrUnsafeImage = errors.New("image cannot be unpacked safely")

// Default limits (see Limits). They are sized so that large real scientific
// images pass with room to spare: a Debian image with R and a few hundred
// r-cran packages, or Python with numpy/scipy/pandas, is about 1–3 GB unpacked
// in 50,000–150,000 files, its largest file a few hundred MB, its layers
// compressed 2–5×.
const (
	// DefaultMaxPullBytes bounds the bytes one Pull downloads: manifests,
	// config and every layer blob, as sent (compressed).
	DefaultMaxPullBytes int64 = 8 << 30
	// DefaultMaxUnpackedBytes bounds the sum of regular-file sizes over every
	// layer of one image (files later deleted by whiteouts count too: they
	// were written).
	DefaultMaxUnpackedBytes int64 = 16 << 30
	// DefaultMaxFileBytes bounds one regular file (its tar size, which for a
	// sparse entry is the expanded size).
	DefaultMaxFileBytes int64 = 4 << 30
	// DefaultMaxEntries bounds the tar entries of all layers of one image.
	DefaultMaxEntries int64 = 1_000_000
	// DefaultMaxCompressionRatio bounds, per layer, uncompressed bytes
	// divided by compressed bytes consumed so far; it applies to the tar
	// stream and, separately, to the file contents the entries expand to
	// (sparse holes included).
	DefaultMaxCompressionRatio int64 = 100
	// DefaultRatioCheckAfter is how many uncompressed bytes of a layer must
	// have been read before the ratio is checked (a small layer of zeros
	// compresses a thousandfold and harms no one).
	DefaultRatioCheckAfter int64 = 64 << 20
	// DefaultMaxZstdWindow bounds the window (history) a zstd layer's frame
	// may ask the decoder to hold in memory: 128 MiB, the reference zstd
	// decoder's own default limit (window log 27), so every layer that
	// `zstd -d` decodes without --memory passes, `zstd --long` and
	// `--ultra -22` included; the format allows 512 MiB and more.
	DefaultMaxZstdWindow int64 = 128 << 20
)

// Limits bound what one image may cost the runner's disk and time. A zero
// field means its Default* constant; a negative field is an error (use a very
// large value to lift a limit). Each refusal wraps ErrUnsafeImage and names
// the field and its value.
type Limits struct {
	// MaxPullBytes: bytes downloaded by one Pull (all blobs, compressed).
	// Checked against the pinned manifest's sizes before any layer is
	// fetched, and again while bytes stream. Default DefaultMaxPullBytes.
	MaxPullBytes int64
	// MaxUnpackedBytes: regular-file bytes written for one image, all layers.
	// Default DefaultMaxUnpackedBytes.
	MaxUnpackedBytes int64
	// MaxFileBytes: bytes of one regular file. Default DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxEntries: tar entries of one image, all layers. Default DefaultMaxEntries.
	MaxEntries int64
	// MaxCompressionRatio: uncompressed/compressed bytes of one layer, checked
	// once RatioCheckAfter uncompressed bytes of that layer have been read.
	// Two uncompressed counts are held to it, each on its own: the layer's
	// tar stream, and the bytes of file contents its entries expand to (the
	// holes of a sparse entry count; the stream does not carry them).
	// Default DefaultMaxCompressionRatio.
	MaxCompressionRatio int64
	// RatioCheckAfter: uncompressed bytes of a layer before its ratio is
	// checked. Default DefaultRatioCheckAfter.
	RatioCheckAfter int64
	// MaxZstdWindow: the decoder window (and so memory) a zstd layer may
	// need, in bytes; at least 1024. Default DefaultMaxZstdWindow.
	MaxZstdWindow int64
}

// effective returns l with zero fields replaced by their defaults, or an
// error naming the first negative field.
func (l Limits) effective() (Limits, error) {
	fields := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"MaxPullBytes", &l.MaxPullBytes, DefaultMaxPullBytes},
		{"MaxUnpackedBytes", &l.MaxUnpackedBytes, DefaultMaxUnpackedBytes},
		{"MaxFileBytes", &l.MaxFileBytes, DefaultMaxFileBytes},
		{"MaxEntries", &l.MaxEntries, DefaultMaxEntries},
		{"MaxCompressionRatio", &l.MaxCompressionRatio, DefaultMaxCompressionRatio},
		{"RatioCheckAfter", &l.RatioCheckAfter, DefaultRatioCheckAfter},
		{"MaxZstdWindow", &l.MaxZstdWindow, DefaultMaxZstdWindow},
	}
	for _, f := range fields {
		switch {
		case *f.v < 0:
			return Limits{}, fmt.Errorf("imagestore Limits.%s = %d: must be >= 0 (0 means the default, %d)", f.name, *f.v, f.def)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if l.MaxZstdWindow < zstd.MinWindowSize {
		return Limits{}, fmt.Errorf("imagestore Limits.MaxZstdWindow = %d: must be at least %d, the smallest zstd window", l.MaxZstdWindow, zstd.MinWindowSize)
	}
	return l, nil
}

// limitError is a refusal for exceeding limit (a Limits field name) whose
// configured value is max; what says what was being counted.
func limitError(limit string, max int64, what string) error {
	return fmt.Errorf("%w: %s exceeds Limits.%s = %d (a hostile or unusually large image; the store's Limits raise it)", ErrUnsafeImage, what, limit, max)
}
