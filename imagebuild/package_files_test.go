package imagebuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageFilesAreReadInsideThePackage: a binder/ or .binder/ that is a
// symbolic link (here to a directory outside the package holding an
// install.R) and a symlinked file in binder/ or at the top are refused,
// never followed.
func TestPackageFilesAreReadInsideThePackage(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "install.R"), []byte("cat('from outside the package')\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "apt.txt"), []byte("curl\n"), 0o644)
	cases := map[string]func(dir string){
		"binder link":  func(dir string) { os.Symlink(outside, filepath.Join(dir, "binder")) },
		".binder link": func(dir string) { os.Symlink(outside, filepath.Join(dir, ".binder")) },
		"file link in binder": func(dir string) {
			os.Mkdir(filepath.Join(dir, "binder"), 0o755)
			os.Symlink(filepath.Join(outside, "install.R"), filepath.Join(dir, "binder", "install.R"))
		},
		"file link at the top": func(dir string) {
			os.WriteFile(filepath.Join(dir, "apt.txt"), []byte("curl\n"), 0o644)
			os.Symlink(filepath.Join(outside, "install.R"), filepath.Join(dir, "install.R"))
		},
		"relative link inside": func(dir string) {
			os.WriteFile(filepath.Join(dir, "real.txt"), []byte("curl\n"), 0o644)
			os.Symlink("real.txt", filepath.Join(dir, "apt.txt"))
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			setup(dir)
			pf, err := ReadPackageFiles(dir)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("read: %+v, %v", pf, err)
			}
		})
	}
}
