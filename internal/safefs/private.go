package safefs

import (
	"os"
	"path/filepath"
)

// WritePrivate writes data to path atomically with mode 0600, creating its
// directory with mode 0700: a temporary file in the same directory, then
// renamed over path (replace) or hard-linked to it, which fails when path
// exists (!replace). A reader never sees a partial file; the credentials and
// the signing keys of `dotlab agent register` are written so.
func WritePrivate(path string, data []byte, replace bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".private-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(tmp.Name(), path)
	}
	return os.Link(tmp.Name(), path)
}
