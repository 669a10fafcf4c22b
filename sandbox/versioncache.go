package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxVersionCache bounds the runtime-version cache file read back (a
// RuntimeVersion is a few hundred bytes).
const maxVersionCache = 64 << 10

// versionCacheFile is the on-disk form of a CheckVersion result
// (Runtime.VersionCache): the binary's identity ("path dev:ino size
// mtime", binaryIdentity) and what Version found for it.
type versionCacheFile struct {
	Binary  string         `json:"binary"`
	Version RuntimeVersion `json:"version"`
}

// loadVersionCache returns the version remembered in r.VersionCache for the
// binary whose identity is id, and false when there is none to trust: no
// file, another binary (replaced, upgraded, moved: any of path, inode, size
// or mtime differs), a file that is not a regular file of this process's
// user writable by it alone, over 64 KiB, not the JSON CheckVersion writes,
// or holding a field Version itself would refuse. The caller then probes
// again, so a damaged cache costs a probe, never a wrong answer.
func (r *Runtime) loadVersionCache(id string) (RuntimeVersion, bool) {
	if r.VersionCache == "" {
		return RuntimeVersion{}, false
	}
	f, err := os.OpenFile(r.VersionCache, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return RuntimeVersion{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !privateFile(fi) {
		return RuntimeVersion{}, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxVersionCache+1))
	if err != nil || len(data) > maxVersionCache {
		return RuntimeVersion{}, false
	}
	var c versionCacheFile
	if json.Unmarshal(data, &c) != nil || c.Binary != id || c.Version.Name != r.name() {
		return RuntimeVersion{}, false
	}
	if checkCachedVersion(c.Version) != nil {
		return RuntimeVersion{}, false
	}
	return c.Version, true
}

// privateFile reports whether fi is a regular file owned by this process's
// effective user that neither its group nor others may write.
func privateFile(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 == 0 && int(st.Uid) == os.Geteuid()
}

// checkCachedVersion holds a cached RuntimeVersion to the rules a probed one
// passed: every field printable ASCII of at most 128 bytes, Fixes only the
// CVE names DotLab knows.
func checkCachedVersion(v RuntimeVersion) error {
	for _, s := range []string{v.Version, v.Commit, v.Spec, v.Package, v.PackageVersion} {
		if err := checkField(s); err != nil {
			return err
		}
	}
	if v.Version == "" {
		return errors.New("no version")
	}
	known := map[string]bool{CVE202421626: true, CVE202531133: true, CVE202552565: true, CVE202552881: true}
	for _, f := range v.Fixes {
		if !known[f] {
			return fmt.Errorf("unknown fix %q", clip(f))
		}
	}
	return nil
}

// storeVersionCache writes v for the binary id into r.VersionCache (mode
// 0600, through a temporary file renamed into place, so a reader never
// sees half a file). Failing to write is not an error of the run: the next
// run probes again.
func (r *Runtime) storeVersionCache(id string, v RuntimeVersion) {
	if r.VersionCache == "" {
		return
	}
	data, err := json.Marshal(versionCacheFile{Binary: id, Version: v})
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.VersionCache), ".runtime-version-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err != nil || cerr != nil {
		return
	}
	os.Rename(tmp.Name(), r.VersionCache)
}
