package safefs

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestStrictName(t *testing.T) {
	for name, want := range map[string]string{
		"a/b": "a/b", "./a/b": "a/b", "/a/b": "a/b", "//a": "a", ".": "", "./": "", "/": "",
	} {
		got, err := StrictName(name, strings.HasSuffix(name, "/") || name == "." || name == "/")
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", name, got, err, want)
		}
	}
	if got, err := StrictName("dir/", true); err != nil || got != "dir" {
		t.Errorf("dir/: %q %v", got, err)
	}
	for _, bad := range []string{"", "../a", "a/../b", "a/..", "a//b", "a/./b", "a\x00b", "file/", strings.Repeat("x", 256), strings.Repeat("a/", 2100)} {
		if _, err := StrictName(bad, false); !errors.Is(err, ErrUnsafeName) {
			t.Errorf("%.40q accepted: %v", bad, err)
		}
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(Limits{MaxEntries: 2, MaxBytes: 10, MaxFileBytes: 6})
	if b.Entry("a") != nil || b.Entry("b") != nil || !errors.Is(b.Entry("c"), ErrOverBudget) {
		t.Fatal("entry count")
	}
	if !errors.Is(b.File("big", 7), ErrOverBudget) || b.File("ok", 6) != nil {
		t.Fatal("file size")
	}
	if _, err := io.ReadAll(b.Reader("ok", 6, strings.NewReader("123456"))); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.File("more", 5), ErrOverBudget) {
		t.Fatal("total bytes")
	}
	// A body longer than its declared size (a lying zip header) is refused.
	if _, err := io.ReadAll(NewBudget(Limits{}).Reader("liar", 3, strings.NewReader("12345"))); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("lying size: %v", err)
	}
}
