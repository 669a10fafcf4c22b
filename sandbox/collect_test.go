package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// diskUse is the allocated size of everything under dir, in bytes.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// TestHostileSparseOutput: sparse files cost the tmpfs nothing but their
// full length on the host; the copy-out counts apparent sizes and copies
// nothing when the sum is over the output limit. Each file is under the
// per-file limit (RLIMIT_FSIZE = the output limit, 16 MiB here), their sum
// is not: the shape of four 1000 MB `truncate -s` files under the default
// 1 GiB limit, which used to copy 4 GB to the host disk.
func TestHostileSparseOutput(t *testing.T) {
	rt, e := setup(t, "runc")
	o := run(t, rt, e, small, `
for i in 1 2 3 4; do truncate -s 10M "$DOTLAB_OUT_DIR/sparse$i"; done
echo '{"x": 1}' > "$DOTLAB_OUT_DIR/results.json"`)
	if o.res.ExitCode != 0 {
		t.Fatalf("exit %d", o.res.ExitCode)
	}
	if o.res.OverLimit == "" || !strings.Contains(o.res.OverLimit, "output size limit") {
		t.Fatalf("sparse files not refused: OverLimit=%q files=%+v", o.res.OverLimit, o.res.Files)
	}
	if len(o.res.Files) != 0 {
		t.Fatalf("files copied despite the refusal: %+v", o.res.Files)
	}
	if use := diskUse(t, o.out); use > 1<<20 {
		t.Fatalf("host out dir uses %d bytes", use)
	}
}

// TestHostileDeepOutput: a directory chain deeper than MaxOutputDepth is
// refused before anything is copied.
func TestHostileDeepOutput(t *testing.T) {
	rt, e := setup(t, "runc")
	o := run(t, rt, e, small, `
d="$DOTLAB_OUT_DIR"; i=0; while [ $i -lt 40 ]; do d="$d/d"; i=$((i+1)); done; mkdir -p "$d"
echo '{"x": 1}' > "$DOTLAB_OUT_DIR/results.json"`)
	if !strings.Contains(o.res.OverLimit, "deeper than") || len(o.res.Files) != 0 {
		t.Fatalf("deep tree: OverLimit=%q files=%d", o.res.OverLimit, len(o.res.Files))
	}
}

// TestOutputWithinLimits: files whose apparent sizes sum to just under the
// cap are all copied, with their hashes.
func TestOutputWithinLimits(t *testing.T) {
	rt, e := setup(t, "runc")
	l := small
	l.OutputBytes = 4 << 20
	o := run(t, rt, e, l, `
truncate -s 2M "$DOTLAB_OUT_DIR/a"; mkdir "$DOTLAB_OUT_DIR/s"; truncate -s 1M "$DOTLAB_OUT_DIR/s/b"
echo '{"x": 1}' > "$DOTLAB_OUT_DIR/results.json"`)
	if o.res.OverLimit != "" || len(o.res.Files) != 3 {
		t.Fatalf("within limits: OverLimit=%q files=%+v", o.res.OverLimit, o.res.Files)
	}
	if fi, err := os.Stat(filepath.Join(o.out, "s", "b")); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("s/b copied as %v %v", fi, err)
	}
}
