package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/safefs"
	"github.com/dotlab/dotlab/internal/unidiff"
	"golang.org/x/sys/unix"
)

// MaxPatchedFileBytes bounds a file a declared patch changes: it is read
// whole, changed in memory and written back (source files are far smaller).
const MaxPatchedFileBytes = 64 << 20

// applyPatches applies the manifest's code.patches, in order, to codeDir:
// the run's own copy of the code, written fresh from the commit or archive
// for this run, before the sandbox binds it read-only at /work/code (and,
// with scratch, as the lower layer of /work/scratch). Each file is reached
// through an os.Root with no symbolic link on the way, must be a regular
// file (or, for a creation, not exist), keeps its mode, and is changed with
// zero fuzz (internal/unidiff). A patch that does not apply is spec_issue
// naming it, its reason and the hunk.
func applyPatches(log *Log, patches []dotlab.Patch, codeDir string) error {
	if len(patches) == 0 {
		return nil
	}
	root, err := os.OpenRoot(codeDir)
	if err != nil {
		return err
	}
	defer root.Close()
	for i, pt := range patches {
		what := fmt.Sprintf("code.patches[%d] (%q)", i, pt.Reason)
		fds, err := unidiff.Parse(pt.Diff)
		if err != nil {
			return issuef("%s is not a patch DotLab applies: %v", what, err)
		}
		added, removed := 0, 0
		var files []string
		for _, fd := range fds {
			if err := applyFileDiff(root, fd); err != nil {
				log.Error("code", what+" does not apply", map[string]any{"patch": i, "reason": pt.Reason, "file": fd.Path, "error": err.Error()})
				return issuef("%s does not apply to the code: %s: %v; nothing was executed", what, fd.Path, err)
			}
			added, removed, files = added+fd.Added, removed+fd.Removed, append(files, fd.Path)
		}
		log.Info("code", fmt.Sprintf("code.patches[%d] applied", i), map[string]any{"patch": i, "reason": pt.Reason, "files": files, "added": added, "removed": removed})
	}
	return nil
}

// applyFileDiff applies one file's hunks in root.
func applyFileDiff(root *os.Root, fd unidiff.FileDiff) error {
	if err := safefs.NoSymlinkParents(root, fd.Path); err != nil {
		return err
	}
	if fd.Create {
		if _, err := root.Lstat(fd.Path); !errors.Is(err, fs.ErrNotExist) {
			return errors.New("the patch creates this file, but the code already has it")
		}
		data, err := unidiff.Apply(nil, fd)
		if err != nil {
			return err
		}
		if err := root.MkdirAll(path.Dir(fd.Path), 0o755); err != nil {
			return err
		}
		_, err = safefs.CreateFrom(root, fd.Path, 0o644, bytes.NewReader(data))
		return err
	}
	old, err := safefs.ReadNoFollow(root, fd.Path, MaxPatchedFileBytes)
	if err != nil {
		return err
	}
	data, err := unidiff.Apply(old, fd)
	if err != nil {
		return err
	}
	if fd.Delete {
		if len(data) != 0 {
			return errors.New("the patch deletes this file but does not remove all of its lines")
		}
		return root.Remove(fd.Path)
	}
	f, err := root.OpenFile(fd.Path, os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// TreeSHA256 is the SHA-256 (64 lowercase hex) of the code tree at dir as
// a run executes it (docs/manifest-spec.md "code.patches", the run's
// environment.code_tree_sha256): one line per file, symlink and
// executable in byte order of its slash-separated path,
//
//	file|exec|symlink SP sha256-of-content-or-link-target SP len SP path LF
//
// hashed together, len being the path's length in bytes (decimal): a path
// may hold any byte but NUL and '/' in its names (git admits a newline), so
// its length, not a delimiter, ends it and no tree's lines can spell
// another tree's. Directories are implied by the paths (empty ones are
// not listed). Anyone can recompute it from a checkout with the commit's
// files and the manifest's patches applied.
func TreeSHA256(dir string) (string, error) {
	type entry struct{ kind, sum, path string }
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		e := entry{path: filepath.ToSlash(rel)}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256([]byte(target))
			e.kind, e.sum = "symlink", hex.EncodeToString(sum[:])
		case fi.Mode().IsRegular():
			if e.sum, err = fileSHA256(p); err != nil {
				return err
			}
			e.kind = "file"
			if fi.Mode()&0o111 != 0 {
				e.kind = "exec"
			}
		default:
			return nil // the checkout writes no other kinds
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	h := sha256.New()
	for _, e := range entries {
		io.WriteString(h, strings.Join([]string{e.kind, e.sum, strconv.Itoa(len(e.path)), e.path}, " ")+"\n")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// patchCode applies m's declared patches to codeDir and records the hash
// of the tree the run will execute (environment.code_tree_sha256). Without
// patches it does nothing: the commit or archive hash already names the tree.
func (r *Runner) patchCode(log *Log, m *dotlab.Manifest, codeDir string, fs *facts) error {
	if len(m.Code.Patches) == 0 {
		return nil
	}
	start := r.Clock.Now()
	if err := applyPatches(log, m.Code.Patches, codeDir); err != nil {
		return err
	}
	sum, err := TreeSHA256(codeDir)
	if err != nil {
		return err
	}
	fs.env.CodeTreeSHA256 = sum
	log.Info("code", "patched tree hashed", map[string]any{"code_tree_sha256": sum, "patches": len(m.Code.Patches), "seconds": r.since(start)})
	return nil
}
