package safefs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// CreateSparseFrom writes exactly r's bytes, leaves aligned zero blocks as
// holes (leading, inner and trailing ones), and writes zeros that do not
// fill an aligned block.
func TestCreateSparseFrom(t *testing.T) {
	const mib = 1 << 20
	block := func(off int64, s string) [2]any { return [2]any{off, s} }
	cases := map[string]struct {
		size  int64
		data  [][2]any // offset, bytes
		alloc int64    // at most this many bytes allocated
	}{
		"empty":             {0, nil, 0},
		"all hole":          {64 * mib, nil, 0},
		"leading data":      {16 * mib, [][2]any{block(0, "head")}, 64 << 10},
		"trailing data":     {16 * mib, [][2]any{block(16*mib-3, "end")}, 64 << 10},
		"unaligned inner":   {16 * mib, [][2]any{block(4095, "xy"), block(9*mib+1, "z")}, 64 << 10},
		"short, no block":   {100, [][2]any{block(50, "q")}, 64 << 10},
		"dense":             {3*sparseBlock + 7, [][2]any{block(0, strings.Repeat("d", 3*sparseBlock+7))}, 64 << 10},
		"zeros under block": {sparseBlock - 1, nil, 0},
	}
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			want := make([]byte, c.size)
			for _, d := range c.data {
				copy(want[d[0].(int64):], d[1].(string))
			}
			file := strings.ReplaceAll(name, " ", "-")
			// A reader handing out odd-sized pieces, as a tar reader may.
			n, err := CreateSparseFrom(root, file, 0o644, io.LimitReader(&oddReader{r: bytes.NewReader(want)}, c.size))
			if err != nil || n != c.size {
				t.Fatalf("CreateSparseFrom = %d, %v; want %d", n, err, c.size)
			}
			got, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("content differs (%d bytes, want %d): %v", len(got), len(want), err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(dir, file), &st); err != nil {
				t.Fatal(err)
			}
			if st.Blocks*512 > c.alloc {
				t.Fatalf("%d-byte file allocates %d bytes, want at most %d", st.Size, st.Blocks*512, c.alloc)
			}
		})
	}
}

type oddReader struct {
	r io.Reader
	i int
}

func (o *oddReader) Read(p []byte) (int, error) {
	o.i++
	if k := 1 + (o.i*7919)%70000; len(p) > k {
		p = p[:k]
	}
	return o.r.Read(p)
}

// A reader's error is returned as it is, io.ErrUnexpectedEOF (a truncated
// tar entry) included; the name must not exist beforehand.
func TestCreateSparseFromErrors(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	truncated := io.MultiReader(strings.NewReader("abc"), errReader{io.ErrUnexpectedEOF})
	if _, err := CreateSparseFrom(root, "t", 0o644, truncated); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated reader: %v", err)
	}
	if _, err := CreateSparseFrom(root, "t", 0o644, strings.NewReader("x")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("existing name: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
