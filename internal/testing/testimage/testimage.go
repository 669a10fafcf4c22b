// Package testimage builds the busybox fixture image for tests outside
// imagestore (whose own tests cannot import this without an import cycle).
package testimage

import (
	"testing"

	"github.com/dotlab/dotlab/imagestore"
	"github.com/dotlab/dotlab/internal/testing/testfix"
)

// Busybox builds testfix.BusyboxRootfs into store under ref and unpacks it.
// It returns the manifest digest ("sha256:…") and the rootfs directory.
func Busybox(t testing.TB, store *imagestore.Store, ref string) (string, string) {
	t.Helper()
	d, err := store.Build(testfix.BusyboxRootfs(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := store.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	rootfs, err := store.Rootfs(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d.String(), rootfs
}
